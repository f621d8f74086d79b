// Worker mode: one client process of a measured point. See bench.hpp for the protocol.
#include <sys/mman.h>
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bench.hpp"
#include "objdirect/client.hpp"

namespace objdirect::bench {
namespace {

using Clock = std::chrono::steady_clock;

double process_cpu_s() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

// Anonymous mapping, touched so that page faults stay out of the measured window. huge_pages:
// advised MADV_HUGEPAGE before the first touch, as numpy does for arrays of 4 MiB or more: CMA
// (libfabric shm, UCX sm) then walks and pins 2 MiB pages, and a 256 MiB GET ran 1.3-1.9x as
// fast (docs/BENCHMARKS.md, "Which buffers the bench measures").
struct Buffer {
  std::byte* ptr = nullptr;
  std::size_t size = 0;
  Buffer(std::size_t n, bool huge_pages) : size(n) {
    void* p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      std::perror("objdirect-bench worker: mmap");
      std::exit(3);
    }
    ptr = static_cast<std::byte*>(p);
    if (huge_pages) ::madvise(p, n, MADV_HUGEPAGE);
    // Non-zero, position-dependent bytes: a PUT of zeros could be special-cased somewhere.
    for (std::size_t i = 0; i < n; i += 4096) ptr[i] = static_cast<std::byte>(i >> 12 | 1);
    std::memset(ptr, 0x5a, std::min<std::size_t>(n, 4096));
  }
  ~Buffer() { munmap(ptr, size); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
};

}  // namespace

int worker_main(int argc, char** argv) {
  CLI::App app{"objdirect-bench worker (internal)"};
  std::string endpoint, access_key, secret_key, fabric = "none", op = "get", bucket = "bench", key;
  std::string size_text;
  std::uint32_t threads = 1, part_concurrency = 8;
  std::uint64_t duration_ms = 1000, part_size = 8ull << 20;
  std::string id = "w0";
  app.add_option("--endpoint", endpoint)->required();
  app.add_option("--access-key", access_key);
  app.add_option("--secret-key", secret_key);
  app.add_option("--fabric", fabric);
  app.add_option("--op", op)->check(CLI::IsMember({"get", "put"}));
  app.add_option("--bucket", bucket);
  app.add_option("--key", key)->required();
  app.add_option("--size", size_text)->required();
  app.add_option("--threads", threads)->check(CLI::Range(1u, limits::bench_threads_max));
  app.add_option("--duration-ms", duration_ms);
  app.add_option("--part-size", part_size);
  std::string buffer_pages = "huge";
  app.add_option("--buffer-pages", buffer_pages)->check(CLI::IsMember({"huge", "base"}));
  app.add_option("--part-concurrency", part_concurrency);
  app.add_option("--id", id);
  app.allow_extras(false);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  auto size = parse_size(size_text);
  if (!size) {
    std::cerr << "worker: bad --size\n";
    return 2;
  }

  ClientConfig cfg;
  cfg.endpoint = endpoint;
  cfg.access_key = access_key;
  cfg.secret_key = secret_key;
  cfg.fabric = fabric;
  cfg.part_size_bytes = part_size;
  cfg.concurrency = part_concurrency;
  cfg.connections_max = std::max<std::uint32_t>(64, threads * part_concurrency);
  auto client_r = Client::create(cfg);
  if (!client_r.ok()) {
    std::cout << "fail " << client_r.status().message() << std::endl;
    return 1;
  }
  Client& client = **client_r;

  std::vector<std::unique_ptr<Buffer>> bufs;
  std::vector<MemoryHandle> handles(threads);
  for (std::uint32_t t = 0; t < threads; ++t) {
    bufs.push_back(std::make_unique<Buffer>(*size, buffer_pages == "huge"));
    if (fabric != "none") {
      auto h = client.register_memory(bufs.back()->ptr, *size);
      if (!h.ok()) {
        std::cout << "fail register_memory: " << h.status().message() << std::endl;
        return 1;
      }
      handles[t] = *h;
    }
  }
  // Each thread's own key for PUT, so that threads do not overwrite one another.
  auto key_of = [&](std::uint32_t t) {
    return op == "get" ? key : key + "-" + id + "-" + std::to_string(t);
  };
  auto one = [&](std::uint32_t t) -> Result<TransferResult> {
    std::span<std::byte> buf(bufs[t]->ptr, *size);
    if (op == "get") {
      if (handles[t].valid()) return client.get(bucket, key_of(t), handles[t]);
      return client.get(bucket, key_of(t), buf);
    }
    return client.put(bucket, key_of(t), buf);
  };

  // Warm-up: one transfer per thread opens connections and fabrics and connects RDMA peers
  // (the first RMA to a new peer costs 30-130 ms), all outside the measured window.
  std::string warm_path, warm_note;
  // Path auto: first the calls that learn which path is faster at this size (docs/client.md,
  // "The fastest path": a size class's first 3 calls over RDMA, the next 3 over HTTP), until a
  // call is no longer a learning one, so that the window measures what a user's long loop gets.
  // Their number is in the ready line ("learnt=N").
  std::uint32_t learnt = 0;
  if (fabric == "auto") {
    std::string failure;
    auto l = learn_auto(
        [&] {
          auto r = one(0);
          if (!r.ok()) failure = r.status().message();
          return r.ok();
        },
        [&] {
          auto s = client.stats();
          return s.auto_choices["learning_rdma"] + s.auto_choices["learning_http"];
        });
    if (!l) {
      std::cout << "fail warm-up: " << failure << std::endl;
      return 1;
    }
    learnt = *l;
  }
  {
    std::vector<std::thread> ts;
    std::mutex mu;
    std::string failure;
    for (std::uint32_t t = 0; t < threads; ++t) {
      ts.emplace_back([&, t] {
        const auto a = Clock::now();
        auto r = one(t);
        const double first_ms = std::chrono::duration<double, std::milli>(Clock::now() - a).count();
        std::lock_guard lock(mu);
        if (!r.ok()) {
          if (failure.empty()) failure = r.status().message();
        } else if (warm_path.empty()) {
          warm_path = std::string(path_name(r->path));
          warm_note = r->fabric;
          if (!r->reason.empty()) warm_note += (warm_note.empty() ? "(" : " (") + r->reason + ")";
          // The first transfer of a fresh client: peer connection set-up and, over RDMA, the
          // endpoint binding's extra round trip (docs/rdma_protocol.md).
          char first[48];
          std::snprintf(first, sizeof(first), " first=%.3fms", first_ms);
          warm_note += first;
        }
      });
    }
    for (auto& th : ts) th.join();
    if (!failure.empty()) {
      std::cout << "fail warm-up: " << failure << std::endl;
      return 1;
    }
  }
  if (learnt > 0) warm_note += " learnt=" + std::to_string(learnt);
  std::cout << "ready " << warm_path << " " << warm_note << std::endl;

  // One measured window: every thread transfers until the window ends (at least once each, so
  // that a 1 GiB point still measures something). wall_s is the window's own length.
  auto window = [&](std::uint64_t ms) {
    const auto t0 = Clock::now();
    const auto deadline = t0 + std::chrono::milliseconds(ms);
    const double cpu0 = process_cpu_s();
    std::vector<WorkerResult> per(threads);
    std::vector<std::thread> ts;
    for (std::uint32_t t = 0; t < threads; ++t) {
      ts.emplace_back([&, t] {
        WorkerResult& w = per[t];
        do {
          const auto a = Clock::now();
          auto r = one(t);
          const auto b = Clock::now();
          if (!r.ok()) {
            ++w.errors;
            if (w.note.empty()) w.note = r.status().message();
            continue;
          }
          ++w.ops;
          w.bytes += r->bytes;
          w.latency.add(static_cast<std::uint64_t>(std::chrono::nanoseconds(b - a).count()));
          if (r->path == TransferPath::rdma) ++w.rdma_ops;
          if (r->path == TransferPath::http_fallback) {
            ++w.fallback_ops;
            if (w.note.empty()) w.note = "fallback: " + r->reason;
          }
        } while (Clock::now() < deadline && w.errors < 100);
      });
    }
    for (auto& th : ts) th.join();
    WorkerResult total;
    for (const auto& w : per) total.merge(w);
    total.cpu_s = process_cpu_s() - cpu0;
    total.wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
    return total;
  };

  std::string line;
  while (std::getline(std::cin, line)) {
    if (line == "go") {
      std::cout << window(duration_ms).encode() << std::endl;
      break;
    }
    if (auto ms = parse_burst_command(line)) {
      std::cout << window(*ms).encode() << std::endl;
      continue;
    }
    if (line != "end") {
      std::cout << "fail bad command: " << line << std::endl;
      return 2;
    }
    break;
  }
  if (op == "put") {
    for (std::uint32_t t = 0; t < threads; ++t) (void)client.delete_object(bucket, key_of(t));
  }
  return 0;
}

}  // namespace objdirect::bench
