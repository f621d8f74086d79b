// The client's side of the RDMA data plane: one opened fabric (a transport::Transport with its
// progress thread), its registration cache, and the x-amz-rdma-token it builds for a buffer.
//
// Built from rdma.cc when the transport library is part of the build, from rdma_stub.cc
// otherwise (every fabric is then "unavailable" and the client uses HTTP).
//
// Thread safety: Fabric is thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "client/fabric_choice.hpp"
#include "common/status.hpp"

namespace objdirect::limits {
// Fabric::revoke's drain: the client polls its fabric until it has been quiet this long...
// (50 ms: hundreds of times the server's progress back-off while it has unsettled operations, so
// a stream the server still sends is seen as work, even on a loaded host.)
inline constexpr std::uint32_t client_rdma_drain_quiet_ms = 50;
// ...but at most this long in all (UCX reports every message it handles; a peer that keeps
// sending cannot hold the call).
inline constexpr std::uint32_t client_rdma_drain_ms_max = 1000;
// The same two after an answer that says the server's transfer failed (RDMATransferFailed), or
// no answer at all: the server may still be sending. Over UCX sm it cannot cancel what it queued
// for a live peer, and goes on sending after its answer as this side takes it; on a loaded host
// its progress thread can pause for longer than client_rdma_drain_quiet_ms between two pieces
// (python_rdma_late_write's ucx-sm case: 1 of 5 runs beside two busy loops with 50 ms / 1 s,
// 0 of 10 with these; docs/RELIABILITY.md section 5).
inline constexpr std::uint32_t client_rdma_drain_failed_quiet_ms = 250;
inline constexpr std::uint32_t client_rdma_drain_failed_ms_max = 5000;
}  // namespace objdirect::limits

namespace objdirect::client {

struct FabricOptions {
  std::uint32_t registrations_max = 256;
  std::uint64_t registered_bytes_max = 64ull << 30;
  // libfabric:tcp: the local address of the client's HTTP connection to the server, i.e. of
  // the interface that reaches it (transport::Config::local_host; empty: loopback).
  std::string local_host;
  // Called after each new registration of the registration cache (ClientStats::
  // rdma_registrations); may be empty. Called under the cache's lock: must not call back.
  std::function<void()> on_registration;
};

class Fabric {
 public:
  virtual ~Fabric() = default;
  // "libfabric:tcp", "libfabric:shm", "ucx".
  virtual const std::string& name() const = 0;
  // The x-amz-rdma-token text for exactly `buf` (one segment), expiring lifetime_s from now,
  // with a random nonce. The buffer is registered through the cache (or found in it); `hold`
  // keeps that registration alive (and the fabric's progress thread polling at full rate) and must
  // live until the request's reply has been read.
  // Errors: invalid_argument (empty buffer), transport_error (registration refused).
  virtual Result<std::string> make_token(std::span<const std::byte> buf, std::uint32_t lifetime_s,
                                         std::shared_ptr<void>& hold) = 0;
  // After a request that carried a token for `buf` and did not succeed in a way that proves the
  // server's provider is done with buf (no reply, or a 5xx reply): revokes buf's registration and
  // drains this fabric, before the caller falls back to HTTP into buf or returns it to its owner,
  // so that no write (or read) the server's provider still holds can reach buf afterwards.
  //  - revoke: drops every cached registration overlapping buf and the request's `hold` (reset
  //    here); when that was the last reference the registration is closed (fi_close of the MR,
  //    ucp_mem_unmap), under the transport's lock, so a copy the provider is making into buf at
  //    that moment finishes first, and the key admits no later RMA message (libfabric tcp and shm
  //    check it at the target, in this process). A registration the user pinned (MemoryHandle)
  //    or another request still holds stays open until they let go.
  //  - drain: polls the transport on this thread until it has been quiet for
  //    client_rdma_drain_quiet_ms (at most client_rdma_drain_ms_max; with `transfer_failed`, the
  //    request got no answer or RDMATransferFailed: client_rdma_drain_failed_quiet_ms, at most
  //    client_rdma_drain_failed_ms_max), so what the server put on the wire or into our shm
  //    queue before it answered is consumed (and refused) now, not later.
  // Why this suffices, per fabric (the server's half: it tears down the peer before it answers,
  // src/server/rdma/rdma_engine.cc):
  //  - libfabric tcp (rxm): every byte is copied into buf by the provider in this process. The
  //    server has removed us from its AV (closing the connection) before its reply, so nothing new
  //    is sent; what was sent is in our socket and drained here; a new message is refused by the
  //    key check. A message whose header was accepted before the revocation is finished by the
  //    drain (its bytes were already sent).
  //  - libfabric shm: writes up to 4 KiB, and larger ones off shm's fast path, are commands in
  //    our queue that our own progress executes (inline copy, or process_vm_readv from the
  //    server): drained here, and refused by the key check once the MR is closed. Fast-path
  //    writes (above 4 KiB, one remote segment) are copied by the server itself, synchronously
  //    inside its fi_writemsg (process_vm_writev, no key check): they end before that post
  //    returns, so none is still running when the server answers; the server posts nothing more
  //    for a transfer after its op timeout (the rest of the operation is dropped), and a new
  //    transfer needs a new token, which only a new request of the caller's makes.
  //  - UCX tcp/sm: RMA is emulated with active messages that our worker applies (no key check);
  //    the server force-closes its endpoint before answering. Over tcp that ends what it queued,
  //    and what was sent is applied by the drain. Over sm (no peer failure handling) what it had
  //    queued still goes out as we take it, after its answer: the longer drain of a failed
  //    transfer takes it while it flows (a quiet window, not a handshake: a server stalled for
  //    longer than it could still be late). On RC/DC hardware ucp_mem_unmap invalidates the rkey.
  // Direct (device) tokens: `hold` is the registration; it is dropped and the fabric drained.
  virtual void revoke(std::span<const std::byte> buf, std::shared_ptr<void>& hold,
                      bool transfer_failed) {
    (void)buf;
    (void)transfer_failed;
    hold.reset();
  }
  // Endpoint binding (docs/rdma_protocol.md, "Endpoint binding"): every token names this
  // fabric's mailbox, 32 registered bytes. When a server refuses a token with
  // RDMAEndpointNotBound and an x-amz-rdma-challenge, this writes
  // token::bind_proof(secret_key, challenge, endpoint) into the mailbox; every token made after
  // it carries proof_ready, so the server reads the mailbox and binds this endpoint to the
  // signer. One mailbox per fabric: a Client (one principal, one server) owns its fabric.
  // Errors: invalid_argument (not a challenge), rdma_declined (no mailbox).
  virtual Status prove_binding(std::string_view challenge_text, std::string_view secret_key) {
    (void)challenge_text;
    (void)secret_key;
    return Status(Errc::rdma_declined, name() + " has no binding mailbox");
  }
  // The server's word in its latest RDMA success reply: whether its operations land in this
  // process's memory without this process's polls (x-amz-rdma-target-progress: none,
  // docs/rdma_protocol.md). While it says so, tokens made afterwards keep the progress thread
  // relaxed at any size (a wrong word only slows a transfer: a relaxed hold still polls).
  virtual void note_server_needs_no_polls(bool says) { (void)says; }
  // Pins a registration of [ptr, ptr+len) until the returned object is destroyed.
  virtual Result<std::shared_ptr<void>> pin(void* ptr, std::size_t len) = 0;
  // Whether the transport registers CUDA device memory itself (caps().cuda_memory: FI_HMEM_CUDA,
  // UCS_MEMORY_TYPE_CUDA), i.e. GPUDirect RDMA into device memory is possible.
  virtual bool cuda_memory() const { return false; }
  // make_token for CUDA device memory, registered as MemoryType::cuda (not cached: `hold` keeps
  // the registration). Errors: rdma_declined (no cuda_memory()), invalid_argument (not device
  // memory), transport_error.
  virtual Result<std::string> make_device_token(std::span<const std::byte> buf,
                                                std::uint32_t lifetime_s,
                                                std::shared_ptr<void>& hold) {
    (void)buf;
    (void)lifetime_s;
    (void)hold;
    return Status(Errc::rdma_declined, name() + " cannot register CUDA memory");
  }
};

// Whether this build has the transport library (false: open_fabric always fails).
bool fabrics_built_in() noexcept;

// The fabrics this build can open, with what choosing among them needs (fabric_choice.hpp);
// empty without the transport library.
std::vector<FabricRow> fabric_rows();
// This kernel's identity (transport::host_identity); empty without the transport library.
std::string own_host_id();

// Opens `name` (a fabric_rows() name: "libfabric:tcp", "libfabric:shm", "libfabric:verbs",
// "libfabric:efa", "ucx") with a progress thread.
// Errors: invalid_argument (unknown name), unavailable (not built in, or the provider does not
// initialise here, with its message).
Result<std::unique_ptr<Fabric>> open_fabric(std::string_view name, const FabricOptions& options);

}  // namespace objdirect::client
