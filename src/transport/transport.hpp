// Transport: the one interface of ObjDirect's RDMA data plane (NIXL's backend contract, in order:
// register, pack the remote key, load the remote key, post, check).
//
// A Transport owns one endpoint of one fabric (libfabric RDM endpoint or UCX worker). The same
// object serves both sides of a transfer:
//  - the client (target) registers its buffer, puts local_address() and the region's remote
//    key/address into a token, and keeps the transport alive (its progress thread drives the
//    provider: software RMA over tcp/shm stalls unless the target progresses);
//  - the server (initiator) decodes the token and calls post_write (GET: server memory -> client
//    memory) or post_read (PUT: client memory -> server memory), then wait().
//
// wait() returns OK only once the data is visible at the target: libfabric writes are posted
// with FI_DELIVERY_COMPLETE (except shm writes above 4 KiB, whose fast path copies before it
// completes; see libfabric/README.md), UCX operations are followed by ucp_ep_flush_nbx. Reads
// complete when the bytes are in local memory.
//
// Backends: src/transport/libfabric (tcp;ofi_rxm, shm, verbs;ofi_rxm, efa) and src/transport/ucx.
// Each folder's README.md states what it supports.
//
// Thread safety: a Transport is thread-safe: any thread may register, post and wait, and the
// progress thread runs concurrently (one internal mutex serialises provider calls).
// MemoryRegion states its own rules below.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.hpp"
#include "token/token.hpp"

namespace objdirect::limits {
// Local plus remote segments accepted by one post_write/post_read call (bounds planning work).
inline constexpr std::size_t transport_segments_max = 4096;
}  // namespace objdirect::limits

namespace objdirect::transport {

using token::Addressing;
using token::Backend;
using token::MemoryType;

struct Config {
  // "libfabric:tcp" | "libfabric:shm" | "libfabric:verbs" | "libfabric:efa" | "ucx".
  // "libfabric:tcp" opens "tcp;ofi_rxm" on the interface of local_host (below). "ucx" lets UCX
  // choose (sm/tcp/rc/dc) and honours UCX_TLS.
  std::string fabric;
  // Run a thread that polls the provider with back-off. Without it the owner must call
  // progress() often, including on the target side while a peer moves data.
  // Test-only: the environment variable OBJDIRECT_TEST_PROGRESS_DELAY_MS=<n> (at most 10000)
  // makes the progress thread sleep n ms before every poll, as a descheduled thread on a loaded
  // host would (tests/integration of late RDMA writes, python/tests/test_rdma_late_write.py).
  // progress() called directly is not slowed. Never set it in production.
  bool progress_thread = true;
  // Peers (fi_av entries / ucp endpoints) kept; the least recently used idle one is evicted.
  std::size_t peers_max = 1024;
  // The progress thread's longest sleep when it finds nothing to do. Software RMA (tcp, shm)
  // moves on the target only while it polls, and libfabric reports no work on the target side,
  // so this bounds how long an incoming transfer can sit unserved. Lower: faster first byte,
  // more idle wake-ups (about 1e6 / this value per second).
  std::chrono::microseconds progress_sleep_max{100};
  // The same while every keep_progress_hot() handle alive is for a transfer that the fabric moves
  // without this side's polls (libfabric shm above its inject size: the peer's process copies),
  // where polls only cost CPU: eight processes each with a 16 MiB GET in flight spent 0.07-0.09
  // client CPU-s/GiB at 1 ms, 0.040-0.042 at 20 ms (docs/BENCHMARKS.md, optimisation 11). These
  // sleeps start only after ProgressThread::relaxed_ramp_polls_max quiet polls and end at once
  // for a strict hold, so a protocol that does need our polls (shm without CMA) waits at most one
  // of them after a quiet spell. A transport whose every transfer needs this side's polls
  // ignores it.
  std::chrono::microseconds progress_sleep_max_relaxed{20'000};
  // How often the progress thread polls while no keep_progress_hot() handle is alive. wait()
  // polls by itself, but only while its caller waits: an initiator with several operations in
  // flight (the server) holds a handle for the transfer, a target (the client, while a token is
  // out) for the request. Higher: less idle CPU (about 1e6 / this value wake-ups per second).
  std::chrono::microseconds progress_idle_poll{20'000};
  // (Last: tests build Config positionally.)
  // libfabric:tcp only: the local address whose interface the endpoint listens on and connects
  // from (fi_getinfo node with FI_SOURCE). A client passes the local address of its HTTP
  // connection to the server (the interface that reaches it), a server its --listen host;
  // "0.0.0.0" (or "::") serves every interface and lets the kernel's routes pick the source of
  // each connection. Empty: 127.0.0.1 (loopback only). FI_TCP_IFACE set in the environment wins:
  // local_host is then ignored and the provider picks an address of that interface.
  // ucx: on a host without RDMA devices (uses_nic("ucx") false), a non-loopback, non-wildcard
  // local_host limits UCX's network devices to the interface that owns it, unless
  // UCX_NET_DEVICES is set.
  std::string local_host;
};

struct Capabilities {
  std::string name;  // "libfabric:tcp", "libfabric:shm", "ucx"
  Backend backend = Backend::libfabric;
  std::string provider;  // the token's provider field: "tcp", "shm", "verbs", "efa"; UCX: UCX_TLS
  Addressing addressing = Addressing::virtual_address;  // how RemoteSegment::addr is read
  std::size_t rma_iov_max = 1;          // remote segments one provider operation can carry
  std::uint64_t message_bytes_max = 0;  // largest single provider operation (larger are split)
  bool can_write = false;               // post_write available (EFA before libfabric 1.18 has none)
  bool can_read = false;
  bool host_memory = true;
  bool cuda_memory = false;  // only when the provider reports HMEM / UCS_MEMORY_TYPE_CUDA
  // Whether a registration pins physical pages (verbs, efa; UCX, which uses RC/DC hardware where
  // present). Then a registration kept after its request may go stale when the owner frees and
  // reuses the memory, and registering a file mapping would pin page-cache pages. False where
  // the provider resolves the virtual range only when it moves bytes (libfabric tcp and shm):
  // registering is nearly free and a cached registration of reused memory stays correct.
  bool registration_pins = true;
  // Whether post_write may take its source from a read-only file mapping (mmap PROT_READ of a
  // file) registered with register_memory: the server's zero-copy GET from the page cache.
  // libfabric tcp and shm, where the CPU copies out of the mapping and registration pins
  // nothing; not verbs or efa (it would pin the page cache), nor UCX.
  bool mapped_source_write = false;
  // Whether the peer process itself copies into and out of this side's registered memory,
  // outside this endpoint (libfabric shm's fast path: process_vm_readv/writev by the peer). A
  // buffer a failed operation may still touch is then safe to reuse only once this endpoint has
  // settled the operation or is closed, and the peer process is gone (peer_gone_check).
  bool peer_copies = false;
  // Whether the endpoint stalls for good when a peer dies with operations in flight, so that
  // its owner must replace the transport (a new endpoint) after a failed transfer: libfabric
  // 1.17 shm completes in order, and a dead peer's completion never comes (libfabric/README.md).
  bool reset_after_peer_failure = false;
};

// A registered memory range. Deregisters when the last shared_ptr goes away; operations in flight
// hold a reference, so dropping yours during a transfer is safe (the buffer itself must outlive
// the transfer).
// Thread safety: immutable after creation; safe to share.
class MemoryRegion : public std::enable_shared_from_this<MemoryRegion> {
 public:
  virtual ~MemoryRegion() = default;
  MemoryRegion(const MemoryRegion&) = delete;
  MemoryRegion& operator=(const MemoryRegion&) = delete;

  void* ptr() const noexcept { return ptr_; }
  std::size_t length() const noexcept { return length_; }
  MemoryType memory_type() const noexcept { return memory_type_; }
  // libfabric fi_mr_key(); 0 for UCX.
  std::uint64_t key() const noexcept { return key_; }
  // UCX ucp_rkey_pack() bytes; empty for libfabric.
  const std::string& packed_rkey() const noexcept { return packed_rkey_; }
  // The address a peer must use for byte `offset` of this region: ptr()+offset under
  // virtual_address addressing, `offset` itself under offset addressing.
  std::uint64_t remote_address(std::size_t offset = 0) const noexcept;
  // A token segment for [offset, offset+length) of this region. Precondition: within length().
  token::Segment remote_segment(std::size_t offset, std::size_t length) const;
  // Orders the calling thread's accesses to this memory with the provider's. On the target side
  // of software RMA (tcp, shm, UCX over tcp/sm) the provider copies into and out of this
  // process's memory on whatever thread progresses it, usually the progress thread; the news
  // that a peer's transfer is done arrives by another path (the server's HTTP reply, a pipe),
  // which gives the reading thread no C++ happens-before edge to that thread. So call this after
  // writing memory a peer will read (before handing out its token) and after learning that a
  // peer finished with it (before reading or reusing it). Cheap: takes and releases the lock
  // under which the provider runs. Safe after the transport is gone.
  virtual void synchronize() const = 0;

 protected:
  MemoryRegion(void* ptr, std::size_t length, MemoryType type, Addressing addressing)
      : ptr_(ptr), length_(length), memory_type_(type), addressing_(addressing) {}

  void* ptr_;
  std::size_t length_;
  MemoryType memory_type_;
  Addressing addressing_;
  std::uint64_t key_ = 0;
  std::string packed_rkey_;
};

// Bytes [offset, offset+length) of a local registered region.
struct LocalSegment {
  MemoryRegion* mr = nullptr;
  std::size_t offset = 0;
  std::size_t length = 0;
};

// A remote range, exactly as carried in a token: {addr, length, key, rkey}.
using RemoteSegment = token::Segment;

// Identifies one posted transfer until wait() consumes it.
using OpId = std::uint64_t;

class Transport {
 public:
  virtual ~Transport() = default;

  virtual const Capabilities& caps() const noexcept = 0;

  // This endpoint's address (fi_getname bytes / ucp worker address): the token's endpoint field.
  virtual std::string local_address() const = 0;

  // Registers [ptr, ptr+len) for local use and remote read/write.
  // Errors: invalid_argument (null/empty, or cuda when caps().cuda_memory is false),
  // transport_error (provider refused, with its message).
  virtual Result<std::shared_ptr<MemoryRegion>> register_memory(void* ptr, std::size_t len,
                                                                MemoryType type) = 0;

  // Copies the concatenation of `local` into the concatenation of `remote` at peer_address
  // (a token's endpoint). Segment boundaries need not line up; lists longer than
  // caps().rma_iov_max and pieces larger than message_bytes_max are split into several provider
  // operations. All of them are covered by one OpId.
  // Checked before anything is posted: every local segment lies inside its region, the two
  // lists carry the same number of bytes (a remote range shorter than asked is refused), the
  // operation is in caps(), at most transport_segments_max segments.
  // Never blocks on the fabric: what the provider cannot take yet (full queue, connection still
  // being set up) is posted later by progress, within wait()'s timeout. Every OpId must be
  // passed to wait() once, or its bookkeeping stays until the transport is destroyed.
  // An error means that nothing of the operation reached the provider (the local memory is
  // free again at once); a failure after some parts were handed over returns the OpId, and
  // wait() reports the failure.
  // Errors: invalid_argument (those checks), unavailable (all peers_max peers busy),
  // transport_error (peer address refused or posting failed, with the provider's message).
  virtual Result<OpId> post_write(std::string_view peer_address,
                                  std::span<const LocalSegment> local,
                                  std::span<const RemoteSegment> remote) = 0;
  // Copies the concatenation of `remote` into `local`. Same rules as post_write.
  virtual Result<OpId> post_read(std::string_view peer_address, std::span<const LocalSegment> local,
                                 std::span<const RemoteSegment> remote) = 0;

  // Blocks until op completes (data visible at the target for writes, in local memory for
  // reads), fails, or timeout passes; consumes op either way. Drives progress itself while
  // waiting.
  // Errors: rdma_transfer_failed (a provider operation failed, with its message; or timeout,
  // after which the operation may still touch the buffers until it ends or the transport is
  // destroyed), transport_error (a part posted late was refused), invalid_argument (unknown or
  // already consumed op).
  // A timeout also treats the peer as failed, so that what the provider still holds for it ends
  // (op_settled) rather than reaching its memory later: libfabric (except shm) removes the peer
  // from the AV (the connection closes; every operation to it fails), UCX force-closes its
  // endpoint (over sm, without peer error handling, the queued requests still go out as the
  // peer takes them). The next post to that address connects afresh (UCX: once nothing is in
  // flight to it any more; until then posts to it fail).
  virtual Status wait(OpId op, std::chrono::milliseconds timeout) = 0;

  // Whether the provider is done with `op`, an operation whose wait() gave up (timeout): every
  // provider operation it posted has completed or failed, so the provider no longer reads or
  // writes its buffers and they may be reused or freed. Also true for an operation wait()
  // consumed normally (ids are never reused). Never blocks: false while another thread holds
  // the transport's lock (a stuck provider call), so "false" means "not known to be done".
  virtual bool op_settled(OpId op) const = 0;

  // Polls the provider once; returns whether anything happened. Needed only without the
  // progress thread.
  virtual bool progress() = 0;

  // Peers currently cached (for tests and metrics).
  virtual std::size_t peers_cached() const = 0;

  // Keeps the progress thread polling at full rate (sleeps of at most progress_sleep_max) while
  // the returned handle lives: hold one while a peer may access this side's memory, e.g. from
  // handing out a token until its request is answered. Without any, the progress thread polls
  // every progress_idle_poll. The handle must not outlive the transport. Never null (a dummy
  // without a progress thread). transfer_bytes: the one contiguous range of this side's memory
  // the peer may move for the holder, in bytes (0: not known, or several ranges). Where the
  // fabric moves a range that large without this side's polls, and while every live handle is
  // such a one, the thread polls with sleeps of up to progress_sleep_max_relaxed instead.
  // peer_needs_no_polls: the peer said that its operations land without this side's polls
  // (its rma_lands_without_target_progress(), sent as x-amz-rdma-target-progress, see
  // docs/rdma_protocol.md): on a fabric that can carry out a transfer without this side's polls
  // at all, the handle may then be a relaxed one at any size (libfabric shm: for a small range
  // only while other handles live, since polling shortens a lone request's wait).
  virtual std::shared_ptr<void> keep_progress_hot(std::uint64_t transfer_bytes,
                                                  bool peer_needs_no_polls) = 0;

  // Whether an operation this side initiates now, with one remote segment and of any size, is
  // complete with the bytes in place (a write) or in hand (a read) without any poll by the
  // target's process: libfabric shm while CMA to peers works (this process copies with
  // process_vm_writev / process_vm_readv inside the post). A server tells its client so in the
  // reply, whose progress thread may then idle during its next requests. It may change at run
  // time (libfabric shm decides at its first peer); a wrong "true" only slows the target, since
  // a relaxed hold still polls. Never blocks.
  virtual bool rma_lands_without_target_progress() const = 0;

  // For a fabric whose caps().peer_copies: a check of whether the process behind peer_address
  // (a token's endpoint) can never run again (it exited or is a zombie; a reused pid reads as
  // alive), i.e. can never copy into or out of this side's memory again. The check stays valid
  // after this transport is destroyed, and is cheap (it reads /proc). Where the address names
  // no process this transport can see, and on every other fabric, it always answers false:
  // "not known to be gone".
  virtual std::function<bool()> peer_gone_check(std::string_view peer_address) const {
    (void)peer_address;
    return [] { return false; };
  }
};

// Client side: the token that lets a peer reach `segments` (from MemoryRegion::remote_segment of
// this transport's regions, all of memory type `type`) until expires_unix_s. Fills backend,
// provider, addressing and endpoint from the transport and a fresh random nonce. Encode it with
// token::encode; token::validate says whether it fits the token limits.
token::Token make_token(const Transport& transport, std::vector<RemoteSegment> segments,
                        MemoryType type, std::uint64_t expires_unix_s);

// Server side: whether this transport can serve a decoded token: same backend, same libfabric
// provider (UCX's provider field is only a hint), same addressing mode, memory type supported,
// RMA write/read as needed (need_write: GET pushes into the client; PUT reads from it).
// Errors: rdma_declined, saying what differs (the server then answers 501 / falls back to HTTP).
Status check_token(const Transport& transport, const token::Token& token, bool need_write);

// What code outside the backends may know about a fabric name, without opening it: one row per
// name create_transport() accepts. This table (transport.cc) is the only list of fabric names
// outside src/transport/<backend>/: callers iterate it or look names up here, and ask an open
// transport's caps() what it does, instead of comparing names (the ctest entry source_layering
// refuses a fabric-name literal anywhere else in src/). Its order is the order in which the
// server opens them under --fabric auto, and so the order of x-amz-rdma-fabrics.
struct FabricTraits {
  std::string_view name;
  // Moves bytes through memory shared by the two processes (libfabric shm: /dev/shm and CMA):
  // only between processes of one kernel, i.e. where host_identity() is equal on both sides.
  bool same_host_only = false;
  // How it moves bytes: always by an RDMA NIC (verbs, efa), never (tcp, shm: the CPU copies),
  // or by a NIC only where one is present (UCX over rc/dc; over tcp or sm it emulates RMA in
  // software): see uses_nic().
  enum class Nic : std::uint8_t { never, always, when_present } nic = Nic::never;
  // Where `auto` tries it, lowest first, among fabrics of the same kind (same-host, NIC,
  // software; client/fabric_choice.hpp).
  int preference = 0;
};
std::span<const FabricTraits> fabric_table();
// The row for `name`, or null for a name no backend accepts.
const FabricTraits* find_fabric(std::string_view name);
// Whether `name` would move bytes by an RDMA NIC on this machine: Nic::always, or for
// Nic::when_present what the backend finds (ucx: an RDMA device in /sys/class/infiniband and a
// UCX_TLS that does not rule rc/dc out). Cheap: opens nothing.
bool uses_nic(std::string_view name);

// Process-wide counts of the backends' workarounds, over every transport ever created (for
// metrics): libfabric shm posts stuck on a dead peer's region lock (libfabric 1.17 only;
// docs/RELIABILITY.md section 6) whose lock the shm watchdog released, and those it left alone
// (another libfabric release, a region it could not read or that did not match).
struct ProviderStats {
  std::uint64_t dead_peer_lock_releases = 0;
  std::uint64_t dead_peer_locks_left_alone = 0;
};
ProviderStats provider_stats();

// This kernel's identity: 16 hex digits of the SHA-256 of /proc/sys/kernel/random/boot_id, the
// same in every network namespace and container of one boot, different on another machine (or
// after a reboot). The server publishes it beside its fabrics (x-amz-rdma-host-id) so that a
// client proposes a same_host_only fabric only to a server on its own kernel. Empty when
// boot_id cannot be read.
const std::string& host_identity();

// Voluntary context switches so far of this process's progress threads (every transport's,
// named "od-progress"; read from /proc/self/task): each sleep or wait such a thread enters is
// one. For tests and diagnostics of how often the threads wake.
unsigned long progress_thread_switches();

// Opens the fabric named in config.fabric.
// Errors: invalid_argument (unknown fabric name), unavailable (the provider does not initialise
// on this machine, with its message).
Result<std::unique_ptr<Transport>> create_transport(const Config& config);

}  // namespace objdirect::transport
