// IoRunners: the threads that run an io_context's handlers: about one per core while no handler
// blocks, and a spare in place of each one that does.
//
// Why: Asio's scheduler wakes an idle thread for nearly every handler it runs while handlers
// are queued, so with many more threads than cores each small request paid about ten context
// switches (docs/BENCHMARKS.md, "Server threads"). Yet the S3 handlers make blocking calls (an
// fsync, a wait for an RDMA transfer) on these threads, and a few such calls on few threads
// froze every other connection (docs/RELIABILITY.md, section 4). So: threads_base threads run
// the io_context; each marks its blocking calls with a BlockingScope (common/blocking.hpp); a
// monitor thread looks at the scopes every handoff_after (while scopes are being entered; every
// monitor_idle_tick otherwise; at once when a scope that blocks for certain, an fsync, begins)
// and, while fewer than threads_base runners are not blocked for
// longer than handoff_after, wakes a parked spare or starts a new one, up to threads_max threads
// in all. A spare parks again as soon as it would make more than threads_base runners that are
// not blocked.
//
// Thread safety: run() once, from one thread; stats() from any thread.
#pragma once

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "common/blocking.hpp"

namespace objdirect::http {

class IoRunners {
 public:
  struct Options {
    unsigned threads_base = 4;  // runners while none is blocked (at least 1)
    unsigned threads_max = 32;  // the most threads, spares included (at least threads_base)
    // How long a BlockingScope lasts before a spare takes its thread's place.
    std::chrono::microseconds handoff_after{1000};
    // The monitor's tick while no scope was entered since the last one.
    std::chrono::milliseconds monitor_idle_tick{20};
  };
  struct Stats {
    unsigned threads = 0;        // threads started so far (runners and spares, parked included)
    unsigned running = 0;        // not parked now (blocked ones included)
    std::uint64_t handoffs = 0;  // spares woken or started in a blocked runner's place
  };

  IoRunners(boost::asio::io_context& ioc, Options opts);
  ~IoRunners();
  IoRunners(const IoRunners&) = delete;
  IoRunners& operator=(const IoRunners&) = delete;

  // Runs the io_context on threads_base threads (the caller is one of them) until it is
  // stopped, then joins every thread it started.
  void run();
  Stats stats() const;

 private:
  struct Runner {
    BlockingSlot slot;
    std::thread thread;
    bool parked = false;  // under mu_
  };

  void monitor();
  static void poke(void* self);  // a runner entered a certain BlockingScope
  void spare_main(Runner* r);
  // Runners not parked and not blocked for longer than handoff_after, now. mu_ held.
  unsigned serving_locked(std::int64_t now_ns) const;
  // Scopes entered on every runner so far. mu_ held.
  std::uint64_t entered_locked() const;

  boost::asio::io_context& ioc_;
  const Options opts_;
  mutable std::mutex mu_;
  std::condition_variable park_cv_;               // a spare unparked, or stopping
  std::condition_variable monitor_cv_;            // stopping
  std::vector<std::unique_ptr<Runner>> runners_;  // under mu_; never shrinks until run() ends
  unsigned running_ = 0;                          // under mu_
  bool stopping_ = false;                         // under mu_
  bool poked_ = false;                            // under mu_: look at the slots now
  std::atomic<std::uint64_t> handoffs_{0};
};

}  // namespace objdirect::http
