// run_parallel: one index range spread over a few threads, stopping at the first error; and
// HelperPool, reusable threads for it.
//
// Why a pool: run_parallel without one starts and joins width-1 threads per call. For a batch of
// a few objects that is most of the call's cost: a DataLoader's read-ahead (get_many of 4
// objects of ~150 KiB per call) spent 430 us of client CPU per sample against 120 us without
// read-ahead, much of it in pthread_create and thread stacks (docs/BENCHMARKS.md, dataset).
//
// Thread safety: run_parallel calls fn concurrently from up to `width` threads, each index once.
// HelperPool is thread-safe; its destructor must not run while a run_parallel uses it.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "common/status.hpp"

namespace objdirect {

// Threads that run run_parallel's helpers, started on demand and kept until the pool ends.
// A task is handed to an idle thread, or to a new one while fewer than threads_max exist;
// otherwise try_run refuses it and the caller does the work itself. Nothing waits in a queue,
// so a run_parallel nested in a helper (a get_many item that is a multipart GET) cannot
// deadlock on a full pool.
class HelperPool {
 public:
  explicit HelperPool(std::size_t threads_max);
  ~HelperPool();
  HelperPool(const HelperPool&) = delete;
  HelperPool& operator=(const HelperPool&) = delete;

  // Runs task on a pool thread; false (task not run, not kept) when every one of threads_max
  // threads is busy.
  bool try_run(std::function<void()> task);
  // Threads started so far (idle ones included), for tests.
  std::size_t threads() const;

 private:
  struct Worker {
    std::function<void()> task;  // under mu_; set while the worker is handed one
    bool idle = true;            // under mu_
    std::condition_variable cv;  // a task handed over, or stopping
    std::thread thread;
  };
  void main(Worker* w);

  const std::size_t threads_max_;
  mutable std::mutex mu_;
  bool stopping_ = false;
  std::vector<std::unique_ptr<Worker>> workers_;
};

namespace detail {
// What the caller and its helpers of one run_parallel share. A helper that starts after the
// caller closed it touches nothing else: fn lives on the caller's stack.
struct ParallelRun {
  std::mutex mu;
  std::condition_variable done_cv;
  bool closed = false;  // under mu: the caller has finished; helpers must not start fn
  unsigned active = 0;  // under mu: helpers inside the loop
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  Status first;  // under mu
};
}  // namespace detail

// Runs fn(0..n-1) on up to `width` threads, the caller's included: the others are new threads,
// or the pool's when one is given (as many as it has free, possibly none). After the first
// error no new index starts; that error is returned.
template <class Fn>
Status run_parallel(std::size_t n, std::uint32_t width, Fn&& fn, HelperPool* pool = nullptr) {
  auto run = std::make_shared<detail::ParallelRun>();
  auto loop = [&fn, n](detail::ParallelRun& r) {
    for (;;) {
      if (r.failed.load()) return;
      std::size_t i = r.next.fetch_add(1);
      if (i >= n) return;
      Status st = fn(i);
      if (!st.ok()) {
        std::lock_guard lk(r.mu);
        if (r.first.ok()) r.first = st;
        r.failed = true;
      }
    }
  };
  const std::size_t threads = std::min<std::size_t>(n, std::max<std::uint32_t>(width, 1));
  std::vector<std::thread> own;
  for (std::size_t t = 1; t < threads; ++t) {
    if (pool == nullptr) {
      own.emplace_back([&loop, &run] { loop(*run); });
      continue;
    }
    // The helper holds the shared state; it enters the loop only while the caller is in it.
    bool taken = pool->try_run([run, &loop] {
      {
        std::lock_guard lk(run->mu);
        if (run->closed) return;
        ++run->active;
      }
      loop(*run);
      std::lock_guard lk(run->mu);
      --run->active;
      run->done_cv.notify_all();
    });
    if (!taken) break;  // the pool is busy: the caller (and the helpers it has) do the rest
  }
  loop(*run);
  for (auto& th : own) th.join();
  std::unique_lock lk(run->mu);
  run->closed = true;
  run->done_cv.wait(lk, [&] { return run->active == 0; });
  return run->first;
}

}  // namespace objdirect
