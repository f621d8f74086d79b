// RdmaEngine: the server side of ObjDirect's data plane.
//
// It owns the enabled transports (libfabric tcp/shm/verbs/efa, UCX) and one pool of pre-registered
// staging buffers. A GET reads the object from storage into staging buffers and RDMA-WRITEs each
// into the client's memory while the next chunk is read (pipelined, `pipeline_depth` chunks in
// flight); where the transport can write from a file mapping (caps().mapped_source_write:
// libfabric tcp/shm) it instead maps the object's (immutable) blob files read-only and
// RDMA-WRITEs from the page cache, one copy instead of two (zero_copy_get); a PUT RDMA-READs
// the client's memory chunk by chunk and hands each chunk, in order, to a sink that hashes and
// appends it to the store.
//
// Admission control: a transfer takes up to pipeline_depth staging buffers from the pool, fewer
// when fewer are free (it then pipelines over what it got). The bytes a transfer holds count
// against inflight_bytes_max (server) and per_client_inflight_bytes_max (per client endpoint).
// When not even one chunk fits, the transfer waits in a FIFO queue, at most admission_wait_max,
// for a release (any lease returned wakes the queue) and is admitted as soon as one chunk fits;
// a waiter that is held back only by its own client's limit does not block the waiters behind it
// (and a new arrival goes ahead of it), so one busy client cannot stall the others and no
// client starves. The bound expired, or admission_waiters_max transfers already waiting, or the
// engine shutting down (shutdown() wakes every waiter), or limits that can never admit one chunk:
// the transfer is refused with Errc::slow_down, which the S3 layer turns into 503 SlowDown with
// Retry-After (the client retries briefly, then falls back to HTTP). Waiters block the S3
// worker threads that call send()/receive(), so admission_waiters_max must stay below their
// number (objdirect-server lowers it to half of --threads when needed). Nothing ever queues
// without bound. Before waiting, one client with 8 GETs of 256 MiB in flight (4 fit its 64 MiB)
// fell back to HTTP on most of them; with it, none do (docs/BENCHMARKS.md, optimisation 8).
//
// Failure: an operation that fails or times out (client died) fails the transfer with
// rdma_transfer_failed. A buffer whose operation timed out may still be written by the provider,
// so it is retired: taken out of the pool (a fresh buffer replaces it) and counted in
// stats().buffers_retired. A reaper thread frees retired buffers once nothing can touch them
// any more (docs/RELIABILITY.md, "Retired buffers"):
//  - the provider reported every timed-out operation on them as finished or failed
//    (Transport::op_settled), or
//  - the transport they were registered with is destroyed (its endpoint closed: nothing of ours
//    moves data any more) and, where the peer process itself copies into our memory
//    (caps().peer_copies: libfabric shm's CMA), the peer process is gone too
//    (Transport::peer_gone_check).
// While retired_buffers_max buffers are retired, can_serve() declines new transfers (the client
// falls back to HTTP), so a stream of dying clients cannot grow the server's memory without bound.
// libfabric shm never recovers from a peer that died with operations in flight (its endpoint
// reports completions strictly in order, and the dead peer's never comes), so after a failed
// transfer on a transport with caps().reset_after_peer_failure the engine replaces it with a new
// endpoint and registers the pool with it (stats().transport_resets); transfers still running on
// the old one fail or finish.
// No late writes: send()/receive() return a failure (the S3 layer then answers 500) only once
// the provider is done with the operations the transfer abandoned, at most one more op_timeout
// (stats().failures_answered_unsettled counts replies sent when that bound expired), so that the
// client, which revokes its registration and reuses its buffer once it has the answer, gets no
// late bytes (docs/RELIABILITY.md section 5). A retired set keeps the transport's progress hot
// until freed, and where the peer copies (shm) keeps the transport itself open while the peer
// process lives. The engine knows fabrics only by transport::fabric_table() and caps(): it never
// compares a fabric name nor includes a backend header.
//
// Thread safety: thread-safe. send() and receive() block the calling thread; call them from a
// worker pool, not from the HTTP event loop.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "common/metrics_sink.hpp"
#include "common/status.hpp"
#include "storage/object_store.hpp"
#include "token/token.hpp"
#include "transport/transport.hpp"

namespace objdirect::limits {
inline constexpr std::uint64_t rdma_buffer_pool_bytes_max = 64ull << 30;
inline constexpr std::size_t rdma_chunk_bytes_max = 256ull << 20;
// RdmaEngine::create requires chunk_bytes <= buffer_pool_bytes <= rdma_buffer_pool_bytes_max, so
// the largest chunk must fit in the largest pool or rdma_chunk_bytes_max could never be used.
static_assert(rdma_chunk_bytes_max <= rdma_buffer_pool_bytes_max);
}  // namespace objdirect::limits

namespace objdirect::rdma {

struct RdmaOptions {
  // "auto" (every transport that initialises), "none", or a comma list of
  // libfabric:tcp, libfabric:shm, libfabric:verbs, libfabric:efa, ucx.
  std::string fabrics = "auto";
  // The address the server listens on (--listen host): libfabric tcp serves that interface, every
  // one for "0.0.0.0" / "::" (transport::Config::local_host). Empty: loopback.
  std::string local_host;
  std::uint64_t buffer_pool_bytes = 256ull << 20;
  // 8 MiB chunks made large GETs faster but halve the small transfers a client may have in
  // flight under per_client_inflight_bytes_max (every transfer holds at least one chunk), so the
  // default stays 4 MiB (docs/BENCHMARKS.md, optimisation 6).
  std::size_t chunk_bytes = 4ull << 20;
  std::uint64_t inflight_bytes_max = 256ull << 20;
  std::uint64_t per_client_inflight_bytes_max = 64ull << 20;
  unsigned pipeline_depth = 4;
  // GET over a transport with caps().mapped_source_write (libfabric tcp/shm) writes straight
  // from a read-only mapping of the object's files (the page cache) instead of copying each
  // chunk into a staging buffer first. Staging buffers
  // still bound how many chunks are in flight (admission control is unchanged).
  bool zero_copy_get = true;
  // GETs moving fewer bytes copy through staging even then: mapping a range (MAP_POPULATE),
  // registering it and unmapping it (munmap's TLB shootdown across the server's threads) cost
  // more than the copy they save below a few MiB (docs/BENCHMARKS.md, optimisation 12).
  std::uint64_t zero_copy_get_min_bytes = 2ull << 20;
  std::chrono::milliseconds op_timeout{30'000};
  // Retired buffers (see above) held at most before new RDMA transfers are declined. Memory
  // bound: buffer_pool_bytes + (retired_buffers_max + inflight_bytes_max / chunk_bytes) chunks.
  std::uint64_t retired_buffers_max = 64;
  // How long a retired buffer stays retired at least (from the failure). The reaper looks when a
  // set comes of age, and again within reap_recheck (reap_schedule.hpp) while one of age is not
  // yet known safe.
  std::chrono::milliseconds reap_interval{100};
  // Admission control (see above): the longest a transfer waits for a staging buffer before it
  // is refused with slow_down (0: refuse at once, as before), and the most transfers waiting at
  // once (past it a transfer is refused at once). Waiters hold S3 worker threads (the HTTP
  // server's --threads, at least 32 by default): keep admission_waiters_max below that.
  std::chrono::milliseconds admission_wait_max{5'000};
  std::uint32_t admission_waiters_max = 16;
};

struct RdmaStats {
  std::uint64_t buffers_total = 0;
  std::uint64_t buffers_in_use = 0;
  std::uint64_t buffers_retired = 0;        // retired now (a gauge: goes down when reclaimed)
  std::uint64_t buffers_retired_total = 0;  // ever retired
  std::uint64_t buffers_reclaimed = 0;      // retired buffers freed since
  std::uint64_t inflight_bytes = 0;
  std::uint64_t transfers_active = 0;
  std::uint64_t transfers_ok = 0;
  std::uint64_t transfers_failed = 0;
  // Of those: the transport refused the first post, before any byte moved (libfabric tcp: the
  // client's advertised address is unreachable from here; the client then skips that fabric).
  std::uint64_t transfers_refused_by_transport = 0;
  std::uint64_t admissions_refused = 0;  // all refusals with slow_down (immediate + after waiting)
  std::uint64_t admissions_refused_after_wait = 0;  // of those: waited admission_wait_max (or
                                                    // woken by shutdown()) and still no buffer
  std::uint64_t admissions_waited = 0;              // transfers admitted after waiting
  std::uint64_t admission_waiters = 0;              // transfers waiting now (a gauge)
  std::uint64_t admission_wait_ns_total = 0;        // time spent waiting, admitted or refused
  std::uint64_t transport_resets = 0;  // transports replaced after a dead peer stalled them
  // Failed transfers answered while the provider still held some of their operations (the
  // await_settled bound, one op_timeout, expired first).
  std::uint64_t failures_answered_unsettled = 0;
  // libfabric shm posts stuck on a dead client's region lock: locks released / left alone
  // (process-wide, transport::provider_stats()).
  std::uint64_t shm_dead_peer_lock_releases = 0;
  std::uint64_t shm_dead_peer_locks_left_alone = 0;
  std::uint64_t bytes_written = 0;         // GET: server -> client
  std::uint64_t bytes_written_mapped = 0;  // of those, written from the page cache (zero copy)
  std::uint64_t bytes_read = 0;            // PUT: client -> server
  std::uint64_t mailbox_reads = 0;         // read_mailbox() calls that reached the provider
  std::uint64_t mailbox_buffers_kept = 0;  // their buffers kept after an unsettled failure
};

class RdmaEngine {
 public:
  // Opens the transports named in opts.fabrics and registers the buffer pool with each.
  // With "auto", transports that fail to initialise are skipped (see init_log()); with an explicit
  // list, any failure is an error. "none" yields an engine that declines everything.
  static Result<std::shared_ptr<RdmaEngine>> create(const RdmaOptions& opts);
  ~RdmaEngine();

  // "libfabric:shm,libfabric:tcp,ucx": what the server advertises in x-amz-rdma-fabrics.
  const std::string& offered() const { return offered_; }
  bool enabled() const { return !transports_.empty(); }
  // One line per transport tried at startup, with the outcome.
  const std::vector<std::string>& init_log() const { return init_log_; }

  // Whether an enabled transport serves this token (backend, provider, addressing, memory type,
  // and RDMA write for a GET / read for a PUT). Errors: rdma_declined saying why (the S3 layer
  // then answers x-amz-rdma-reply: 501).
  // Also declines (reason: retired_buffers_max) while too many buffers are retired.
  Status can_serve(const token::Token& t, bool need_write) const;
  // Whether retired_buffers_max buffers are retired now (can_serve() declines everything).
  bool retired_buffers_full() const;

  // GET: writes bytes [offset, offset+length) of `reader` into the token's segments, in order.
  // Errors: slow_down (no buffers), invalid_rdma_token (token shorter than length),
  // rdma_transfer_failed, io_error (storage).
  // no_client_polls (optional): set to whether the transport that serves `t` moves its
  // operations without the client's polls (Transport::rma_lands_without_target_progress), which
  // the S3 layer tells the client in a success reply (x-amz-rdma-target-progress: none,
  // docs/rdma_protocol.md); left as it is when no transport serves `t`.
  Status send(const token::Token& t, storage::ObjectReader& reader, std::uint64_t offset,
              std::uint64_t length, bool* no_client_polls = nullptr);
  // PUT: reads the token's total_length bytes from the client, passing them to `sink` in order.
  // no_client_polls: as for send().
  Status receive(const token::Token& t,
                 const std::function<Status(std::span<const std::byte>)>& sink,
                 bool* no_client_polls = nullptr);
  // Whether a transfer of `length` bytes moves as one chunk (chunk_plan.hpp): then it needs no
  // progress thread, and it usually ends as soon as it is posted.
  bool one_chunk(std::uint64_t length) const;

  // Endpoint binding (docs/rdma_protocol.md): RDMA-READs the token's mailbox
  // (limits::token_mailbox_bytes) into `out` through a small registration of its own, outside
  // admission control (32 bytes need no staging chunk). A failed read is answered once the
  // provider is done with it (as send/receive); a buffer it may still write is kept until the
  // engine is destroyed (stats().mailbox_buffers_kept).
  // Errors: invalid_argument (no mailbox, or out too small), rdma_declined (no transport serves
  // the token), rdma_transfer_failed, transport_error.
  Status read_mailbox(const token::Token& t, std::span<std::byte> out);

  RdmaStats stats() const;
  // Registers the engine's series, objdirect_rdma_* from stats() (docs/metrics.md); the engine
  // must outlive every render of `sink`. Once per engine.
  void register_metrics(metrics::Sink& sink) const;

  // Refuses every transfer waiting for admission (they return slow_down at once) and every
  // later one that would have to wait; transfers already admitted run on. Call it before
  // stopping the HTTP server, so that no worker thread sits out admission_wait_max. Idempotent.
  void shutdown();

 private:
  struct Buffer;
  struct Lease;
  struct Mapping;
  struct RetiredSet;
  // Maps and registers [offset, offset+length) of reader's files with transport tr. Empty when
  // not possible (no file descriptors, a file shorter than its extent): use staging buffers.
  std::vector<std::shared_ptr<Mapping>> map_extents(transport::Transport& tr,
                                                    storage::ObjectReader& reader,
                                                    std::uint64_t offset, std::uint64_t length);
  RdmaEngine() = default;
  // Takes 1..pipeline_depth staging buffers for a transfer of `bytes` (admission control, see
  // above): waits in FIFO order, at most opts_.admission_wait_max, when not one chunk fits.
  // Errors: slow_down.
  Result<Lease> acquire(const token::Token& t, std::uint64_t bytes, std::size_t ti);
  struct Waiter;
  // Under mu_: how many chunks (at most `want`) client `endpoint` may take now, ignoring waiters.
  std::uint64_t chunks_available(const std::string& endpoint, std::uint64_t want) const;
  // Under mu_: whether `w` (queued) may take buffers now: one chunk fits for it, and none fits
  // for any waiter ahead of it.
  bool admissible(const Waiter& w) const;
  // Returns the lease's buffers to the pool, or, when `retired` is given, replaces them and
  // keeps them (and its mappings) in retired_ until the reaper finds them safe to free.
  void release(Lease& lease, std::unique_ptr<RetiredSet> retired);
  // Frees the retired sets nothing can touch any more. Takes mu_ only briefly: asking a transport
  // never blocks (op_settled), and a transport this drops last is destroyed outside mu_.
  // Returns when to look next (reap_schedule.hpp).
  std::chrono::steady_clock::time_point reclaim_retired();
  // A failed transfer's operations that may still run in the provider.
  // (A failed post left nothing with the provider: Transport::post_write's contract.)
  struct Abandoned {
    std::vector<transport::OpId> ops;  // wait() failed (timeout or error)
  };
  // Before a failed transfer is answered: waits until the provider is done with every abandoned
  // operation (op_settled), at most opts_.op_timeout, so that the client, which revokes its
  // registration and then reuses the buffer once it has the answer, gets no late bytes.
  void await_settled(const transport::Transport& tr, const Abandoned& abandoned);
  std::unique_ptr<RetiredSet> retired_set(const token::Token& t,
                                          const std::shared_ptr<transport::Transport>& tr,
                                          Abandoned abandoned,
                                          std::vector<std::shared_ptr<Mapping>> maps);
  void reaper_loop();
  std::size_t transport_index(const token::Token& t, bool need_write) const;
  std::vector<std::shared_ptr<transport::Transport>> transports_snapshot() const;
  // After a failed transfer on transport `ti` (which was `failed`): replaces it if its provider
  // cannot recover from a dead peer by itself (caps().reset_after_peer_failure: libfabric shm).
  void maybe_reset_transport(std::size_t ti, const std::shared_ptr<transport::Transport>& failed);

  RdmaOptions opts_;
  std::vector<std::string> transport_names_;  // fixed after create()
  std::string offered_;
  std::vector<std::string> init_log_;

  std::mutex reset_mu_;    // one transport reset at a time
  mutable std::mutex mu_;  // guards transports_ (the pointers; the count is fixed after create()),
                           // buffers_, each Buffer's regions, free_, per_client_, stats_
  std::vector<std::shared_ptr<transport::Transport>> transports_;
  std::vector<std::unique_ptr<Buffer>> buffers_;
  std::vector<Buffer*> free_;
  std::map<std::string, std::uint64_t> per_client_;
  RdmaStats stats_;
  std::vector<std::unique_ptr<RetiredSet>> retired_;         // under mu_
  std::vector<std::shared_ptr<void>> kept_mailbox_buffers_;  // under mu_ (read_mailbox)
  std::list<Waiter*> waiters_;        // under mu_: transfers waiting for admission, by arrival
  std::condition_variable admit_cv_;  // with mu_: a lease released, a waiter left, shutdown()
  bool closing_ = false;              // under mu_: shutdown() was called

  std::mutex reaper_mu_;
  std::condition_variable reaper_cv_;
  bool reaper_stop_ = false;  // under reaper_mu_
  std::thread reaper_;
};

}  // namespace objdirect::rdma
