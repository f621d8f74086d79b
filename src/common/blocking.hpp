// BlockingScope: marks a stretch of code in which the calling thread may block in the kernel
// (an fsync, a wait for the LMDB write lock, a disk read, a wait for an RDMA transfer).
//
// The server runs its S3 handlers on few I/O threads (about one per core: more threads than
// cores cost a context switch per handler, server/http/io_runners.hpp). A handler that blocks
// would take its thread away from every other connection; so the blocking calls of the local
// backend and of the RDMA engine sit in a BlockingScope, and the I/O runners watch those scopes:
// one that has lasted longer than the hand-off delay makes the runners start (or wake) a spare
// thread in its place, as Go's scheduler does for a goroutine stuck in a system call. A scope
// that ends quickly (a page-cache hit, an fsync the disk answers at once) costs two clock reads
// and two atomic stores, nothing else. On a thread that is not an I/O runner (the RDMA engine's
// pool, the lifecycle worker, a test) a scope costs one thread_local read.
//
// Scopes nest: only the outermost one counts.
//
// Thread safety: a BlockingScope belongs to the thread that made it (not movable); the slot
// functions are for the runners and are safe to call from any thread on their own slot.
#pragma once

#include <atomic>
#include <cstdint>

namespace objdirect {

// What an I/O runner publishes for its monitor: since when its thread is blocked (steady-clock
// nanoseconds; 0 while not in a scope).
struct BlockingSlot {
  std::atomic<std::int64_t> blocked_since_ns{0};
  // Outermost scopes entered on this slot's thread (the monitor's sign that the server is
  // busy). Written by that thread only: no cache line shared between runners per request.
  std::atomic<std::uint64_t> entered{0};
  // The scope said it blocks for certain (an fsync): counted as blocked at once, and `poke`
  // (set by the runner's owner before the thread runs) called on entry so that a spare can
  // take the place without waiting for the hand-off delay.
  std::atomic<bool> certain{false};
  void (*poke)(void* ctx) = nullptr;
  void* poke_ctx = nullptr;
};

// Makes `slot` the calling thread's (nullptr: none). Called by each I/O runner thread once.
void set_thread_blocking_slot(BlockingSlot* slot) noexcept;

class BlockingScope {
 public:
  // certain: the call blocks for milliseconds whatever the cache holds (an fsync, a commit
  // that fsyncs); a spare is woken on entry instead of after the hand-off delay.
  explicit BlockingScope(bool certain = false) noexcept;
  ~BlockingScope();
  BlockingScope(const BlockingScope&) = delete;
  BlockingScope& operator=(const BlockingScope&) = delete;

 private:
  BlockingSlot* slot_;  // null unless this is the outermost scope on a runner thread
};

// Steady-clock nanoseconds (the clock of BlockingSlot::blocked_since_ns).
std::int64_t blocking_clock_ns() noexcept;

}  // namespace objdirect
