// run_parallel: one index range spread over a few threads, stopping at the first error.
//
// Thread safety: fn is called concurrently from up to `width` threads, each index once.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "common/status.hpp"

namespace objdirect {

// Runs fn(0..n-1) on up to `width` threads (the caller's included). After the first error no
// new index starts; that error is returned.
template <class Fn>
Status run_parallel(std::size_t n, std::uint32_t width, Fn&& fn) {
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex mu;
  Status first;
  auto worker = [&] {
    for (;;) {
      if (failed.load()) return;
      std::size_t i = next.fetch_add(1);
      if (i >= n) return;
      Status st = fn(i);
      if (!st.ok()) {
        std::lock_guard lk(mu);
        if (first.ok()) first = st;
        failed = true;
      }
    }
  };
  std::size_t threads = std::min<std::size_t>(n, std::max<std::uint32_t>(width, 1));
  std::vector<std::thread> pool;
  for (std::size_t t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (auto& th : pool) th.join();
  return first;
}

}  // namespace objdirect
