// IoRunners: the threads that run the server's io_contexts: about one per core while no handler
// blocks, and a spare in place of each one that does.
//
// Why: Asio's scheduler wakes an idle thread for nearly every handler it runs while handlers
// are queued, so with many more threads than cores each small request paid about ten context
// switches (docs/BENCHMARKS.md, "Server threads"). Even with one thread per core, threads
// sharing one io_context hand a connection's handlers to each other: 0.75 context switches and
// ~30 us of server CPU per small GET. So each runner may have an io_context of its own (the
// caller gives one context per runner), and the connections are spread over the contexts: a
// request then runs start to end on one thread.
//
// Yet the S3 handlers make blocking calls (an fsync, a wait for an RDMA transfer) on these
// threads, and a few such calls on few threads froze every other connection
// (docs/RELIABILITY.md, section 4); with a context per runner, a blocked runner would freeze
// every connection of its context. So: each runner marks its blocking calls with a
// BlockingScope (common/blocking.hpp); a monitor thread looks at the scopes every
// handoff_after (while scopes are being entered; every monitor_idle_tick otherwise; at once
// when a scope that blocks for certain, an fsync, begins) and, while a context has fewer
// runners not blocked for longer than handoff_after than it was given, wakes a parked spare or
// starts a new one for that context, up to threads_max threads in all. A spare parks again as
// soon as its context would have more runners not blocked than it was given.
//
// Blocking calls that are not marked (a gateway's upstream requests) need one shared context,
// where any idle runner takes any connection's next handler.
//
// Thread safety: run() once, from one thread; stats() from any thread.
#pragma once

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <condition_variable>
#include <cstddef>
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

  // threads_base runners; runner i runs contexts[i % contexts.size()] (1 <= contexts.size() <=
  // threads_base). The contexts must outlive the IoRunners and be kept from running out of work
  // (a work guard) until they are stopped.
  IoRunners(std::vector<boost::asio::io_context*> contexts, Options opts);
  // One context shared by every runner.
  IoRunners(boost::asio::io_context& ioc, Options opts);
  ~IoRunners();
  IoRunners(const IoRunners&) = delete;
  IoRunners& operator=(const IoRunners&) = delete;

  // Runs the contexts on threads_base threads (the caller is one of them) until one of them is
  // stopped, then stops the others and joins every thread it started.
  void run();
  Stats stats() const;

 private:
  struct Runner {
    BlockingSlot slot;
    std::thread thread;
    std::size_t context = 0;  // under mu_: the index of the context it runs
    bool parked = false;      // under mu_
  };

  void monitor();
  static void poke(void* self);  // a runner entered a certain BlockingScope
  void spare_main(Runner* r);
  // Runners of `context` not parked and not blocked for longer than handoff_after, now. mu_
  // held.
  unsigned serving_locked(std::size_t context, std::int64_t now_ns) const;
  bool any_stopped() const;
  Runner* add_runner_locked(std::size_t context);
  // Scopes entered on every runner so far. mu_ held.
  std::uint64_t entered_locked() const;

  const std::vector<boost::asio::io_context*> contexts_;
  const Options opts_;
  std::vector<unsigned> base_;  // runners given to each context
  mutable std::mutex mu_;
  std::condition_variable park_cv_;               // a spare unparked, or stopping
  std::condition_variable monitor_cv_;            // stopping
  std::vector<std::unique_ptr<Runner>> runners_;  // under mu_; never shrinks until run() ends
  unsigned running_ = 0;                          // under mu_: not parked, all contexts
  bool stopping_ = false;                         // under mu_
  bool poked_ = false;                            // under mu_: look at the slots now
  std::atomic<std::uint64_t> handoffs_{0};
};

}  // namespace objdirect::http
