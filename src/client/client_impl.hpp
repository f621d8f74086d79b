// Client::Impl: the state and the private operations behind objdirect::Client. None of this is in
// the public header (include/objdirect/client.hpp declares `struct Impl;` and holds a pointer to
// it), so that the installed API is the public methods alone. The definitions are split along
// the seams of the client:
//   client.cc          create (the config checks), register_memory, stats, the shared helpers
//   client_fabric.cc   which fabric, whether a request proposes RDMA, token requests and their
//                      retries (fresh token, revocation), the batch arenas' registrations
//   client_get.cc      GET: one request (token or plain), the host flow (first request, then the
//                      parallel If-Match-pinned parts), the device-memory dispatch
//   client_put.cc      PUT: one request, the multipart steps, the host flow, UploadPart
//   client_device.cc   CUDA device memory through the pinned staging pipeline (docs/gpu.md)
//   client_batch.cc    the async calls, get_many and put_many
//   client_buckets.cc  HEAD, listings and the bucket operations
//   client_ops.cc      server-side copy, DeleteObjects, explicit multipart uploads, presign
//
// Thread safety: as Client (thread-safe); the fabric state is under fabric_mu, the counters and
// the HTTP pool are thread-safe themselves, the staging pools lease under their own lock.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "client/cuda/cuda_api.hpp"
#include "client/device_transfer.hpp"
#include "client/http_client.hpp"
#include "client/path_learner.hpp"
#include "client/planner.hpp"
#include "client/rdma.hpp"
#include "client/stats.hpp"
#include "common/parallel.hpp"
#include "objdirect/client.hpp"

namespace objdirect::limits {
// Threads a Client keeps for the parts of its calls (Client::Impl::helpers). Past it, a call's
// own thread does the work no helper is free for.
inline constexpr std::size_t client_helper_threads_max = 256;
}  // namespace objdirect::limits

namespace objdirect {

// Client::Impl and MemoryHandle::Pin are nested in exported classes, whose visibility they would
// inherit: marked hidden, so that libobjdirect.so does not export them (docs/architecture.md,
// "The public API").
struct __attribute__((visibility("hidden"))) MemoryHandle::Pin {
  std::vector<std::string> fabrics;
  std::shared_ptr<void> hold;  // the fabric's pinned registration, if any
};

namespace client {

bool parse_u64(std::string_view s, std::uint64_t& out);
bool is_loopback(std::string_view host);
// CUDA device or managed memory (never touched by the CPU: the device paths move it).
bool is_device_memory(const void* p);
// The caller's current CUDA device (0 when CUDA is not loaded), so that a transfer on another
// thread uses the same device and context; bind_device makes it current there.
int caller_device();
Status bind_device(int device);

// How one request (or a whole call) moved its bytes; merged over the pieces of a call.
struct PathInfo {
  // The size of the data call this request is part of (0: the request's own): the crossover is
  // decided on it, so that a call at or above it proposes RDMA for every part, its short last
  // part too, instead of sending that part over HTTP and calling the call a fallback.
  std::uint64_t call_bytes = 0;
  bool attempted = false;  // a token was sent at least once
  bool fell_back = false;  // some bytes went over HTTP after an attempt
  bool plain = false;      // some bytes went over HTTP without an attempt
  std::string fabric;
  std::string reason;

  void merge(const PathInfo& o) {
    attempted = attempted || o.attempted;
    fell_back = fell_back || o.fell_back;
    plain = plain || o.plain;
    if (fabric.empty()) fabric = o.fabric;
    if (reason.empty()) reason = o.reason;
  }
  void fill(TransferResult& r) const {
    r.fabric = fabric;
    r.reason = reason;
    if (fell_back) {
      r.path = TransferPath::http_fallback;
    } else if (attempted && !plain) {
      r.path = TransferPath::rdma;
    } else {
      r.path = attempted ? TransferPath::http_fallback : TransferPath::http;
    }
  }
};

}  // namespace client

struct __attribute__((visibility("hidden"))) Client::Impl {
  using HttpClient = client::HttpClient;
  using HttpRequest = client::HttpRequest;
  using HttpResponse = client::HttpResponse;
  using PathInfo = client::PathInfo;
  using Piece = client::Piece;

  ClientConfig cfg;
  client::ClientCounters stats;  // Client::stats(); declared before `http`, which points at it
  client::Endpoint endpoint;
  std::unique_ptr<HttpClient> http;

  // RDMA state: which fabric, decided in client/fabric_choice.hpp; settled on first use.
  std::mutex fabric_mu;
  bool fabric_settled = false;
  bool rdma_disabled = false;                  // the server does not know the protocol
  std::vector<std::string> fabric_candidates;  // in the order they are tried
  std::map<std::string, std::shared_ptr<client::Fabric>> fabrics_open;
  std::map<std::string, std::string> fabric_open_errors;  // never opens in this process
  std::string no_rdma_reason;                             // why there is no candidate at all
  std::string local_host;                                 // of our HTTP connection (libfabric tcp)

  // --- RDMA decision ------------------------------------------------------------------------
  // GET /?rdma-capabilities: what the server advertises (any reply carries it), or the error of
  // a request that failed or whose error reply had no advertisement.
  Result<client::ServerFabrics> ask_server_fabrics();
  // The same, empty when the request failed (the fabric choice then proposes nothing).
  client::ServerFabrics server_fabrics();

  // The candidates, once: the named fabric, or auto's list for this server.
  void settle_fabric();

  void choose_auto_candidates();

  // The fabric for the next request: the first candidate that opens and has not failed against
  // this server within fabric_failure_memory_ms; null (with the reason) for HTTP.
  std::shared_ptr<client::Fabric> current_fabric(std::string& reason);

  // A transfer over `f` failed on the server's side of the fabric (RDMATransferFailed): skip
  // it against this server for fabric_failure_memory_ms (auto then takes the next candidate).
  void fabric_failed(const std::shared_ptr<client::Fabric>& f, const std::string& reason);

  // The server showed it does not know the protocol: stop proposing tokens.
  void disable_rdma(std::string reason);

  // --- whether RDMA is proposed: the crossover and the rdma policy, in this one place ---------
  // (Which fabric is the business of settle_fabric.) Empty when a token may be proposed for a
  // request moving `bytes` in direction `dir`, else why not (TransferResult::reason, path
  // "http"). direct (GPUDirect) and "required" always propose; "off" never; "auto" with fabric
  // "auto" from the direction's crossover up (rdma_min_bytes for downloads, the smaller of it and
  // rdma_put_min_bytes for uploads): below it plain HTTP is faster (docs/client.md, "The fastest
  // path"). A fabric named explicitly is used at every size.
  enum class Direction { download, upload };
  std::string rdma_skip_reason(std::size_t bytes, Direction dir, bool direct) const;
  // The direction's crossover under fabric "auto" (the smaller of the two for uploads), and
  // whether it is rdma_put_min_bytes.
  std::uint64_t crossover(Direction dir) const;
  bool put_bound(Direction dir) const;
  // Only RDMA may move the bytes: a decline or refusal fails with rdma_declined instead of
  // falling back to HTTP.
  bool rdma_required(bool direct) const { return direct || cfg.rdma == "required"; }

  // auto's measured choice above the crossover (client/path_learner.hpp, ClientConfig::rdma_learn).
  client::PathLearner learner;
  struct AutoChoice {
    client::PathLearner::Pick pick;
    client::PathLearner::Dir dir;
    std::uint64_t bytes;  // the size the call was classed by
    std::chrono::steady_clock::time_point start;
    // For get_one / put_one: non-empty when the call goes over plain HTTP (the pick's reason).
    std::string_view via_http() const {
      return pick.way == client::PathLearner::Way::http ? std::string_view(pick.reason)
                                                        : std::string_view();
    }
  };
  // One request's part in its call (get_one / put_one): the call's size (PathInfo::call_bytes)
  // and, when auto's measurements sent the call over HTTP, the reason (no token then).
  // (No default member initializers: `= {}` below value-initializes it, 0 and empty.)
  struct CallRoute {
    std::uint64_t call_bytes;
    std::string_view via_http;
  };
  static CallRoute route(std::uint64_t call_bytes, const std::optional<AutoChoice>& c) {
    return {call_bytes, c ? c->via_http() : std::string_view()};
  }
  // Engaged when the learner decides a host-memory call moving `bytes` in `dir`: rdma_learn,
  // rdma and fabric "auto", not direct, at or above the direction's crossover, and a fabric
  // candidate for this server (without one every call goes over HTTP anyway). Counts the choice
  // in ClientStats::auto_choices.
  std::optional<AutoChoice> auto_choice(std::uint64_t bytes, Direction dir, bool direct);
  // After a successful call: teaches the learner when the call went the way it was picked for
  // (an RDMA pick that fell back, in part or whole, teaches nothing).
  void auto_learned(const std::optional<AutoChoice>& c, const TransferResult& res);

  // get_many / put_many: registers the batch's host buffers once, merged where they touch
  // (batch_arenas), with the current fabric, when some request of the batch (sizes: bytes each
  // moves) may propose RDMA. The registrations stay pinned while the returned holds live; the
  // requests find them in the registration cache.
  std::vector<std::shared_ptr<void>> pin_batch(std::vector<std::span<std::byte>> bufs,
                                               const std::vector<std::uint64_t>& sizes,
                                               Direction dir);

  // Token for `buf`, or empty with info.reason set. direct: buf is CUDA device memory that the
  // fabric registers itself (GPUDirect RDMA, MemoryType::cuda).
  // used: the fabric that made the token (for revoke()).
  // call: the call this request is part of (its size decides the crossover; its HTTP choice
  // means no token); default: the request is the call.
  std::string try_token(std::span<const std::byte> buf, Direction dir, PathInfo& info,
                        std::shared_ptr<void>& hold, std::shared_ptr<client::Fabric>& used,
                        bool direct = false, CallRoute call = {});

  // Endpoint binding (docs/rdma_protocol.md, "Endpoint binding"): the server refused the token
  // because this fabric's endpoint has not yet proved that it belongs to our access key
  // (403 RDMAEndpointNotBound with x-amz-rdma-challenge). Writes the proof into the fabric's
  // mailbox and returns a fresh token (new nonce, proof_ready) to send the request again with,
  // or an empty string when there is nothing to prove. execute_rdma does this at most once per
  // request, so a server that keeps refusing costs one round trip and the caller then falls
  // back to HTTP.
  std::string prove_and_retoken(const Result<HttpResponse>& r, std::span<const std::byte> buf,
                                Direction dir, PathInfo& info, std::shared_ptr<void>& hold,
                                std::shared_ptr<client::Fabric>& used, bool direct);

  // Whether the answer to a token request leaves open that the server's provider still holds an
  // operation on the buffer: no answer (connection error, timeout), or a 5xx (RDMATransferFailed
  // after an op timeout, a storage failure mid-transfer). A 2xx means every operation completed;
  // a 4xx comes before the server posts anything (token, auth, precondition, range) or after
  // every operation completed (a PUT's checksum); 501 and 503 SlowDown are refusals before any
  // post, but a 503 is revoked as well (cheap, and a gateway's upstream 503 may come mid-transfer).
  static bool transfer_may_linger(const Result<HttpResponse>& r) {
    return !r.ok() || r->status >= 500;
  }

  // Fabric::revoke after a token request that did not succeed (transfer_may_linger), before
  // the caller falls back to HTTP into the buffer or returns; counted in
  // stats().rdma_revocations. transfer_failed: no answer, or RDMATransferFailed (the longer
  // drain, Fabric::revoke).
  void revoke(const std::shared_ptr<client::Fabric>& f, std::span<const std::byte> buf,
              std::shared_ptr<void>& hold, bool transfer_failed);

  // Sends a request that carries a token, under the retry policy (HttpClient::retry_reason).
  // Every attempt carries a token of its own: after an attempt that may have left an operation
  // on the buffer (transfer_may_linger) the registration is revoked (and the fabric drained)
  // before the next token is made, so no write meant for an earlier attempt can land later, and
  // no token string is ever sent twice (tokens are single-use). A retry of a token request does
  // not wait out Retry-After (an RDMA admission refusal says 1 s): the policy's back-off, then
  // the caller falls back to HTTP. Returns the last answer; `req` carries no token header
  // before or after. When no new token can be made, the last answer is returned.
  Result<HttpResponse> execute_rdma(HttpRequest& req, std::optional<std::span<std::byte>> sink,
                                    std::span<const std::byte> buf, std::string token,
                                    PathInfo& info, std::shared_ptr<void>& hold,
                                    std::shared_ptr<client::Fabric>& fabric_used, bool direct,
                                    std::uint32_t* requests = nullptr);

  // --- one GET request --------------------------------------------------------------------------
  struct GetOutcome {
    HttpResponse resp;
    std::uint64_t bytes = 0;
    PathInfo info;
  };

  // direct: dst is device memory registered by the fabric (GPUDirect RDMA). Only RDMA may write
  // it then: whatever would have gone over HTTP (declined, refused, no token) returns
  // Errc::rdma_declined instead, and a declined reply's body is read into host memory and
  // dropped, so that the caller can move the bytes through the bounce path.
  // sse: SSE-C headers (client::sse_c_headers) sent on the request; empty for none.
  // call: the call this request is part of (CallRoute; default: the request is the call).
  Result<GetOutcome> get_one(const std::string& target, std::optional<Piece> range,
                             std::span<std::byte> dst, const std::string& if_match,
                             bool direct = false, const client::Headers& sse = {},
                             CallRoute call = {});

  // The host flow of Client::get; direct: the buffer is device memory the fabric registers
  // itself (GPUDirect), and anything but RDMA fails with rdma_declined instead of touching it
  // from the CPU. if_match: the ETag (unquoted) every request is pinned to; empty: learnt from
  // the first reply.
  Result<TransferResult> get_host(std::string_view bucket, std::string_view key,
                                  std::span<std::byte> dst, std::optional<ByteRange> range,
                                  bool direct, std::string_view if_match = {},
                                  const client::Headers& sse = {});
  // Device memory: GPUDirect when the fabric can, else (or when declined) the staging pipeline.
  Result<TransferResult> get_device(std::string_view bucket, std::string_view key,
                                    std::span<std::byte> dst, std::optional<ByteRange> range,
                                    void* cuda_stream);
  // HeadObject (Client::head; get_host asks it for an empty buffer).
  Result<ObjectInfo> head(std::string_view bucket, std::string_view key,
                          const client::Headers& sse = {});

  // --- one PUT / UploadPart request -------------------------------------------------------------
  struct PutOutcome {
    std::string etag;
    PathInfo info;
    std::uint32_t requests = 0;
  };

  // crc32c: when not empty, sent as x-amz-checksum-crc32c (base64) for the server to verify.
  // direct: as get_one; a PUT the server did not take over RDMA returns rdma_declined instead
  // of re-sending src (device memory) as the body.
  // extra: headers sent on both the token request and the body request (PutOptions' content
  // type and metadata). call: as get_one.
  Result<PutOutcome> put_one(const std::string& target, std::span<const std::byte> src,
                             const std::string& crc32c = {}, bool direct = false,
                             const client::Headers& extra = {}, CallRoute call = {});

  // checksum_algorithm: sent as x-amz-checksum-algorithm when not empty.
  Result<std::string> xml_call(const std::string& method, const std::string& target,
                               std::string body = {}, const std::string& checksum_algorithm = {},
                               const client::Headers& extra = {});

  // --- multipart upload steps (host and device PUT) -----------------------------------------
  // CreateMultipartUpload; returns the UploadId. algorithm: x-amz-checksum-algorithm when set.
  Result<std::string> create_upload(const std::string& target, const std::string& algorithm = {},
                                    const client::Headers& extra = {});

  void abort_upload(const std::string& target, const std::string& upload_id);

  // CompleteMultipartUpload of parts 1..N with these ETags; returns the object's ETag. Aborts
  // the upload on failure.
  Result<std::string> complete_upload(const std::string& target, const std::string& upload_id,
                                      const std::vector<std::string>& etags,
                                      const std::vector<std::string>& crc32c = {},
                                      const client::Headers& sse = {});

  // The host flow of Client::put (single PUT or multipart upload); direct as get_host.
  Result<TransferResult> put_host(std::string_view bucket, std::string_view key,
                                  std::span<const std::byte> src, bool direct,
                                  const PutOptions* options = nullptr);
  // Client::complete_multipart_upload; sse: the upload's SSE-C headers, or empty.
  Result<TransferResult> complete_parts(std::string_view bucket, std::string_view key,
                                        std::string_view upload_id,
                                        std::span<const CompletedPart> parts,
                                        const client::Headers& sse);
  // Client::upload_part; sse: the upload's SSE-C headers, or empty.
  Result<TransferResult> upload_part(std::string_view bucket, std::string_view key,
                                     std::string_view upload_id, std::uint32_t part_number,
                                     std::span<const std::byte> src, const client::Headers& sse);
  // Device memory, as get_device.
  Result<TransferResult> put_device(std::string_view bucket, std::string_view key,
                                    std::span<const std::byte> src, void* cuda_stream);

  // --- CUDA device memory (docs/gpu.md) -----------------------------------------------------
  // Bounce path: pinned staging pools registered once with the fabric, chunks copied with
  // cudaMemcpyAsync on the caller's stream. The CPU only ever touches the staging memory, also
  // when the server declines RDMA (the HTTP body lands in the staging slot).
  client::DeviceStaging staging;

  // Whether p (device memory) can take the direct path: plain device memory (managed memory
  // always bounces: its pages may migrate) and a fabric that registers CUDA memory itself.
  bool direct_capable(const void* p);

  Result<client::DeviceStaging::Lease> lease_staging(std::size_t chunk_bytes);

  // Client::get's checks, then device_get.
  Result<TransferResult> device_get_call(std::string_view bucket, std::string_view key,
                                         std::span<std::byte> dst, std::optional<ByteRange> range,
                                         void* stream);
  // GET of `range` (or the whole object) into device memory dst.
  Result<TransferResult> device_get(const std::string& target, std::span<std::byte> dst,
                                    std::optional<ByteRange> range, cudaStream_t stream);

  // PUT of device memory src: one PutObject up to the part size, else a multipart upload whose
  // parts are the staging chunks. Every request carries the CRC32C of its bytes, computed on the
  // staging chunk (host memory) and verified by the server.
  Result<TransferResult> device_put(const std::string& target, std::span<const std::byte> src,
                                    cudaStream_t stream);

  // The threads that run the parts of a call (run_parallel's helpers: get_many / put_many items,
  // multipart parts), kept from call to call instead of started per call (common/parallel.hpp).
  // Last, so that it ends first: its threads are idle once no call is in flight.
  HelperPool helpers{limits::client_helper_threads_max};
};

}  // namespace objdirect
