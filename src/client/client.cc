// objdirect::Client: planning, the RDMA-or-HTTP decision per request, and the S3 operations.
#include "objdirect/client.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include "client/complete.hpp"
#include "client/cuda/bounce.hpp"
#include "client/cuda/cuda_api.hpp"
#include "client/cuda/device_path.hpp"
#include "client/device_transfer.hpp"
#include "client/http_client.hpp"
#include "client/planner.hpp"
#include "client/rdma.hpp"
#include "client/s3_xml.hpp"
#include "client/stats.hpp"
#include "common/checksum.hpp"
#include "common/limits.hpp"
#include "common/parallel.hpp"
#include "common/uri.hpp"

namespace objdirect {

using client::HttpClient;
using client::HttpRequest;
using client::HttpResponse;
using client::Piece;

std::string_view path_name(TransferPath path) noexcept {
  switch (path) {
    case TransferPath::rdma:
      return "rdma";
    case TransferPath::http:
      return "http";
    case TransferPath::http_fallback:
      return "http-fallback";
  }
  return "http";
}

// Client::Impl and MemoryHandle::Pin are nested in exported classes, whose visibility they would
// inherit: marked hidden, so that libobjdirect.so does not export them (docs/architecture.md,
// "The public API").
struct __attribute__((visibility("hidden"))) MemoryHandle::Pin {
  std::vector<std::string> fabrics;
  std::shared_ptr<void> hold;  // the fabric's pinned registration, if any
};

std::vector<std::string> MemoryHandle::fabrics() const {
  return pin_ ? pin_->fabrics : std::vector<std::string>{};
}

namespace {

bool parse_u64(std::string_view s, std::uint64_t& out) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}

bool is_loopback(std::string_view host) {
  return host == "localhost" || host.starts_with("127.") || host == "::1";
}

// How one request (or a whole call) moved its bytes; merged over the pieces of a call.
struct PathInfo {
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

// CUDA device or managed memory (never touched by the CPU: the device paths move it).
bool is_device_memory(const void* p) {
  auto kind = cuda::classify_buffer(p);
  return kind == cuda::PointerKind::device || kind == cuda::PointerKind::managed;
}

// The caller's current CUDA device (0 when CUDA is not loaded), so that a transfer on another
// thread uses the same device and context.
int caller_device() {
  int device = 0;
  if (cuda::cuda_loaded_in_process()) {
    if (auto api = cuda::CudaApi::get(); api.ok()) (*api)->get_device(&device);
  }
  return device;
}

Status bind_device(int device) {
  if (!cuda::cuda_loaded_in_process()) return Status::Ok();
  auto api = cuda::CudaApi::get();
  if (!api.ok()) return api.status();
  return (*api)->bind_current_device(device);
}

}  // namespace

struct __attribute__((visibility("hidden"))) Client::Impl {
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
  client::ServerFabrics server_fabrics() {
    HttpRequest req{"GET", "/?rdma-capabilities", {}, {}, false};
    req.xml_reply = true;  // the body is a ListBuckets document: a truncated one is retried
    auto r = http->execute(req);
    if (!r.ok()) return {};
    return client::parse_server_fabrics(r->header("x-amz-rdma-fabrics"),
                                        r->header("x-amz-rdma-host-id"));
  }

  // The candidates, once: the named fabric, or auto's list for this server.
  void settle_fabric() {
    fabric_settled = true;
    if (cfg.fabric == "none") {
      no_rdma_reason = "fabric none";
      return;
    }
    if (!client::fabrics_built_in()) {
      no_rdma_reason = "built without the RDMA transport";
      return;
    }
    if (cfg.fabric != "auto") {
      fabric_candidates.push_back(cfg.fabric);
    } else {
      choose_auto_candidates();
    }
    // The interface that reaches the server, for fabrics that serve one address (libfabric tcp).
    if (auto local = http->local_address(); local.ok()) local_host = *local;
  }

  void choose_auto_candidates() {
    auto offered = server_fabrics();
    const auto rows = client::fabric_rows();
    std::string unused;
    auto order = client::parse_fabric_order(cfg.fabric_order, rows, unused);  // checked in create
    const bool same = client::same_host(offered, client::own_host_id(), is_loopback(endpoint.host));
    fabric_candidates =
        client::auto_candidates(offered, same, order.value_or(std::vector<std::string>{}), rows);
    if (fabric_candidates.empty()) {
      no_rdma_reason =
          offered.fabrics_error.empty()
              ? "server offers no fabric this client can use"
              : "server's fabric advertisement is malformed (" + offered.fabrics_error + ")";
    }
  }

  // The fabric for the next request: the first candidate that opens and has not failed against
  // this server within fabric_failure_memory_ms; null (with the reason) for HTTP.
  std::shared_ptr<client::Fabric> current_fabric(std::string& reason) {
    std::lock_guard lk(fabric_mu);
    if (!fabric_settled) settle_fabric();
    if (rdma_disabled || fabric_candidates.empty()) {
      reason = no_rdma_reason;
      return nullptr;
    }
    std::string why;
    auto& failures = client::FabricFailures::process();
    for (const auto& name : fabric_candidates) {
      std::string skip;
      if (auto e = fabric_open_errors.find(name); e != fabric_open_errors.end()) {
        skip = e->second;
      } else if (auto recent = failures.skipped(endpoint.host_header, name)) {
        skip = *recent;
        stats.on_fabric_skipped(name);
      } else if (auto it = fabrics_open.find(name); it != fabrics_open.end()) {
        return it->second;
      } else {
        client::FabricOptions fo{cfg.registrations_max, cfg.registered_bytes_max, local_host,
                                 [this] { stats.on_rdma_registration(); }};
        auto f = client::open_fabric(name, fo);
        if (f.ok()) {
          std::shared_ptr<client::Fabric> opened = std::move(*f);
          fabrics_open.emplace(name, opened);
          return opened;
        }
        skip = f.status().message();
        fabric_open_errors.emplace(name, skip);
      }
      if (!why.empty()) why += "; ";
      why += skip;
    }
    reason =
        fabric_candidates.size() == fabric_open_errors.size() ? "no fabric opened: " + why : why;
    return nullptr;
  }

  // A transfer over `f` failed on the server's side of the fabric (RDMATransferFailed): skip
  // it against this server for fabric_failure_memory_ms (auto then takes the next candidate).
  void fabric_failed(const std::shared_ptr<client::Fabric>& f, const std::string& reason) {
    if (!f || cfg.fabric_failure_memory_ms == 0) return;
    client::FabricFailures::process().record(
        endpoint.host_header, f->name(), reason,
        std::chrono::milliseconds(cfg.fabric_failure_memory_ms));
    stats.on_fabric_failure(f->name());
  }

  // The server showed it does not know the protocol: stop proposing tokens.
  void disable_rdma(std::string reason) {
    std::lock_guard lk(fabric_mu);
    rdma_disabled = true;
    fabrics_open.clear();
    no_rdma_reason = "RDMA disabled: " + std::move(reason);
  }

  // --- whether RDMA is proposed: the crossover and the rdma policy, in this one place ---------
  // (Which fabric is the business of settle_fabric.) Empty when a token may be proposed for a
  // request moving `bytes`, else why not (TransferResult::reason, path "http"). direct (GPUDirect)
  // and "required" always propose; "off" never; "auto" with fabric "auto" from rdma_min_bytes
  // up: below it plain HTTP is faster (docs/client.md, "The fastest path"). A fabric named
  // explicitly is used at every size.
  std::string rdma_skip_reason(std::size_t bytes, bool direct) const {
    if (direct || cfg.rdma == "required") return {};
    if (cfg.rdma == "off") return "rdma off";
    if (cfg.fabric == "auto" && bytes < cfg.rdma_min_bytes) {
      return "below rdma_min_bytes (" + std::to_string(cfg.rdma_min_bytes) + "): HTTP is faster";
    }
    return {};
  }
  // Only RDMA may move the bytes: a decline or refusal fails with rdma_declined instead of
  // falling back to HTTP.
  bool rdma_required(bool direct) const { return direct || cfg.rdma == "required"; }

  // get_many / put_many: registers the batch's host buffers once, merged where they touch
  // (batch_arenas), with the current fabric, when some request of the batch (sizes: bytes each
  // moves) may propose RDMA. The registrations stay pinned while the returned holds live; the
  // requests find them in the registration cache.
  std::vector<std::shared_ptr<void>> pin_batch(std::vector<std::span<std::byte>> bufs,
                                               const std::vector<std::uint64_t>& sizes);

  // Token for `buf`, or empty with info.reason set. direct: buf is CUDA device memory that the
  // fabric registers itself (GPUDirect RDMA, MemoryType::cuda).
  // used: the fabric that made the token (for revoke()).
  std::string try_token(std::span<const std::byte> buf, PathInfo& info, std::shared_ptr<void>& hold,
                        std::shared_ptr<client::Fabric>& used, bool direct = false) {
    if (buf.empty()) {
      info.reason = "empty transfer";
      return {};
    }
    if (auto why = rdma_skip_reason(buf.size(), direct); !why.empty()) {
      info.reason = std::move(why);
      return {};
    }
    auto f = current_fabric(info.reason);
    if (!f) return {};
    used = f;
    auto t = direct ? f->make_device_token(buf, cfg.token_lifetime_s, hold)
                    : f->make_token(buf, cfg.token_lifetime_s, hold);
    info.fabric = f->name();
    if (!t.ok()) {
      info.reason = "no token: " + t.status().message();
      return {};
    }
    info.attempted = true;
    return std::move(*t);
  }

  // Endpoint binding (docs/rdma_protocol.md, "Endpoint binding"): the server refused the token
  // because this fabric's endpoint has not yet proved that it belongs to our access key
  // (403 RDMAEndpointNotBound with x-amz-rdma-challenge). Writes the proof into the fabric's
  // mailbox and returns a fresh token (new nonce, proof_ready) to send the request again with,
  // or an empty string when there is nothing to prove. execute_rdma does this at most once per
  // request, so a server that keeps refusing costs one round trip and the caller then falls
  // back to HTTP.
  std::string prove_and_retoken(const Result<HttpResponse>& r, std::span<const std::byte> buf,
                                PathInfo& info, std::shared_ptr<void>& hold,
                                std::shared_ptr<client::Fabric>& used, bool direct) {
    if (!r.ok() || r->status != 403 || !used) return {};
    auto challenge = r->header("x-amz-rdma-challenge");
    if (!challenge) return {};
    if (!used->prove_binding(*challenge, cfg.secret_key).ok()) return {};
    hold.reset();  // a refusal moved nothing: the old token's registration hold may go
    return try_token(buf, info, hold, used, direct);
  }

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
  // stats().rdma_revocations.
  void revoke(const std::shared_ptr<client::Fabric>& f, std::span<const std::byte> buf,
              std::shared_ptr<void>& hold) {
    if (f) {
      f->revoke(buf, hold);
    } else {
      hold.reset();
    }
    stats.on_rdma_revocation();
  }

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
                                    std::uint32_t* requests = nullptr) {
    req.retry = false;  // the loop is here: a fresh token per attempt
    retry::Retrier& retrier = http->retrier();
    std::string reasons;
    bool proved = false;
    for (std::uint32_t attempt = 1;; ++attempt) {
      req.headers.emplace_back("x-amz-rdma-token", std::move(token));
      retrier.before_attempt();
      auto r = http->execute(req, sink);
      req.headers.pop_back();
      if (!proved) {
        // A binding challenge is answered once, with a new token; it is not a retry.
        proved = true;
        token = prove_and_retoken(r, buf, info, hold, fabric_used, direct);
        if (!token.empty()) {
          if (requests) ++*requests;
          --attempt;
          continue;
        }
      }
      if (transfer_may_linger(r)) revoke(fabric_used, buf, hold);
      auto reason = HttpClient::retry_reason(req, r);
      if (reason && r.ok() &&
          client::status_from_response(*r).code() == Errc::rdma_transfer_failed) {
        // The fabric failed, not the server: the caller falls back to HTTP and remembers the
        // fabric as failed against this server (docs/client.md, "Choosing a fabric").
        reason.reset();
      }
      retrier.after_attempt(reason);
      if (!reason || !retrier.may_retry(attempt)) {
        if (attempt == 1) return r;
        if (reason) reasons += ", " + *reason;
        const std::string note = retry::attempts_note(attempt, reasons);
        if (!r.ok()) return Status(r.code(), r.status().message() + note);
        r->attempts = attempt;
        r->retry_note = note;
        return r;
      }
      http->count_retry(*reason);
      reasons += (reasons.empty() ? "" : ", ") + *reason;
      retrier.sleep_before(attempt, std::nullopt);
      token = try_token(buf, info, hold, fabric_used, direct);
      if (token.empty()) return r;
    }
  }

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
  Result<GetOutcome> get_one(const std::string& target, std::optional<Piece> range,
                             std::span<std::byte> dst, const std::string& if_match,
                             bool direct = false) {
    GetOutcome out;
    HttpRequest req;
    req.method = "GET";
    req.target = target;
    if (range)
      req.headers.emplace_back("range", client::range_header(range->offset, range->length));
    if (!if_match.empty()) req.headers.emplace_back("if-match", "\"" + if_match + "\"");
    std::shared_ptr<void> hold;
    std::shared_ptr<client::Fabric> fabric_used;
    std::string token = try_token(dst, out.info, hold, fabric_used, direct);
    if (rdma_required(direct) && token.empty() && !dst.empty()) {
      return Status(Errc::rdma_declined, out.info.reason);
    }
    if (!token.empty()) {
      auto r = execute_rdma(req, direct ? std::nullopt : std::optional(dst), dst, std::move(token),
                            out.info, hold, fabric_used, direct);
      req.retry = true;  // a fallback below is a plain request
      if (!r.ok()) return r.status();
      if (!r->ok()) {
        Status st = client::status_from_response(*r);
        if (st.code() != Errc::invalid_rdma_token && st.code() != Errc::rdma_transfer_failed &&
            st.code() != Errc::rdma_declined && st.code() != Errc::slow_down &&
            st.code() != Errc::rdma_endpoint_unbound && st.code() != Errc::rdma_token_replayed) {
          return st;
        }
        // The server refused the token itself: ask again without one.
        out.info.fell_back = true;
        out.info.reason = "server refused the token: " + st.message();
        if (st.code() == Errc::rdma_transfer_failed) fabric_failed(fabric_used, st.message());
        if (rdma_required(direct)) return Status(Errc::rdma_declined, out.info.reason);
      } else {
        auto reply = r->header("x-amz-rdma-reply");
        if (reply && (*reply == "200" || *reply == "206" || *reply == "204")) {
          auto moved = r->header("x-amz-rdma-bytes-transferred");
          std::uint64_t n = 0;
          if (*reply != "204" && (!moved || !parse_u64(*moved, n))) {
            return Status(Errc::io_error,
                          "RDMA reply without a valid x-amz-rdma-bytes-transferred");
          }
          if (n > dst.size()) {
            return Status(Errc::io_error, "server reports more RDMA bytes than the buffer holds");
          }
          out.bytes = n;
          out.resp = std::move(*r);
          return out;
        }
        out.info.fell_back = true;
        out.info.reason =
            reply ? "server declined RDMA (x-amz-rdma-reply: " + std::string(*reply) + ")"
                  : "server ignored x-amz-rdma-token (no x-amz-rdma-reply)";
        if (rdma_required(direct)) return Status(Errc::rdma_declined, out.info.reason);
        out.bytes = r->sink_bytes;
        out.resp = std::move(*r);
        return out;
      }
    } else {
      out.info.plain = true;
    }
    auto r = http->execute(req, dst);
    if (!r.ok()) return r.status();
    if (!r->ok()) return client::status_from_response(*r);
    out.bytes = r->sink_bytes;
    out.resp = std::move(*r);
    return out;
  }

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
  // type and metadata).
  Result<PutOutcome> put_one(const std::string& target, std::span<const std::byte> src,
                             const std::string& crc32c = {}, bool direct = false,
                             const client::Headers& extra = {}) {
    PutOutcome out;
    std::shared_ptr<void> hold;
    std::shared_ptr<client::Fabric> fabric_used;
    std::string token = try_token(src, out.info, hold, fabric_used, direct);
    if (rdma_required(direct) && token.empty() && !src.empty()) {
      return Status(Errc::rdma_declined, out.info.reason);
    }
    if (!token.empty()) {
      HttpRequest req;
      req.method = "PUT";
      req.target = target;
      req.send_content_length = true;
      req.headers.emplace_back("x-amz-content-sha256", std::string(sigv4::kUnsignedPayload));
      if (!crc32c.empty()) req.headers.emplace_back("x-amz-checksum-crc32c", crc32c);
      req.headers.insert(req.headers.end(), extra.begin(), extra.end());
      auto r = execute_rdma(req, std::nullopt, src, std::move(token), out.info, hold, fabric_used,
                            direct, &out.requests);
      ++out.requests;
      if (!r.ok()) return r.status();
      auto reply = r->header("x-amz-rdma-reply");
      if (r->ok() && reply && *reply == "200") {
        out.etag = s3::unquote_etag(r->header("etag").value_or(""));
        return out;
      }
      out.info.fell_back = true;
      if (r->ok() && !reply) {
        // A server that does not know the protocol stored an empty object (or part): the body
        // PUT below replaces it, and no more tokens go to this server.
        out.info.reason =
            "server ignored x-amz-rdma-token (no x-amz-rdma-reply); re-sent with body";
        disable_rdma("server ignored x-amz-rdma-token");
      } else if (r->ok()) {
        out.info.reason = "server answered x-amz-rdma-reply: " + std::string(*reply);
      } else {
        Status st = client::status_from_response(*r);
        bool rdma_error =
            (reply && *reply == "501") || st.code() == Errc::rdma_declined ||
            st.code() == Errc::invalid_rdma_token || st.code() == Errc::rdma_transfer_failed ||
            st.code() == Errc::not_implemented || st.code() == Errc::slow_down ||
            st.code() == Errc::rdma_endpoint_unbound || st.code() == Errc::rdma_token_replayed;
        if (!rdma_error) return st;
        out.info.reason = "server declined RDMA: " + st.message();
        if (st.code() == Errc::rdma_transfer_failed) fabric_failed(fabric_used, st.message());
      }
      if (rdma_required(direct)) return Status(Errc::rdma_declined, out.info.reason);
    } else {
      out.info.plain = true;
    }
    HttpRequest req;
    req.method = "PUT";
    req.target = target;
    req.send_content_length = true;
    req.body = src;
    if (!crc32c.empty()) req.headers.emplace_back("x-amz-checksum-crc32c", crc32c);
    req.headers.insert(req.headers.end(), extra.begin(), extra.end());
    auto r = http->execute(req);
    ++out.requests;
    if (!r.ok()) return r.status();
    if (!r->ok()) return client::status_from_response(*r);
    out.etag = s3::unquote_etag(r->header("etag").value_or(""));
    return out;
  }

  // checksum_algorithm: sent as x-amz-checksum-algorithm when not empty.
  Result<std::string> xml_call(const std::string& method, const std::string& target,
                               std::string body = {}, const std::string& checksum_algorithm = {},
                               const client::Headers& extra = {}) {
    HttpRequest req;
    req.method = method;
    req.target = target;
    req.send_content_length = method == "POST" || method == "PUT";
    req.body = std::as_bytes(std::span(body.data(), body.size()));
    req.xml_reply = true;
    if (!body.empty()) req.headers.emplace_back("content-type", "application/xml");
    if (!checksum_algorithm.empty()) {
      req.headers.emplace_back("x-amz-checksum-algorithm", checksum_algorithm);
    }
    req.headers.insert(req.headers.end(), extra.begin(), extra.end());
    auto r = http->execute(req);
    if (!r.ok()) return r.status();
    if (!r->ok()) return client::status_from_response(*r);
    return std::move(r->body);
  }

  // --- multipart upload steps (host and device PUT) -----------------------------------------
  // CreateMultipartUpload; returns the UploadId. algorithm: x-amz-checksum-algorithm when set.
  Result<std::string> create_upload(const std::string& target, const std::string& algorithm = {},
                                    const client::Headers& extra = {}) {
    auto created = xml_call("POST", target + "?uploads", {}, algorithm, extra);
    if (!created.ok()) return created.status();
    auto init = s3::decode_initiate_multipart(*created);
    if (!init.ok()) return client::reply_error(init.status(), "CreateMultipartUpload");
    return std::move(init->upload_id);
  }

  void abort_upload(const std::string& target, const std::string& upload_id) {
    (void)xml_call("DELETE", target + "?uploadId=" + uri_encode(upload_id, true));
  }

  // CompleteMultipartUpload of parts 1..N with these ETags; returns the object's ETag. Aborts
  // the upload on failure.
  Result<std::string> complete_upload(const std::string& target, const std::string& upload_id,
                                      const std::vector<std::string>& etags,
                                      const std::vector<std::string>& crc32c = {}) {
    std::vector<std::pair<std::uint32_t, std::string>> parts;
    parts.reserve(etags.size());
    for (std::size_t i = 0; i < etags.size(); ++i) {
      parts.emplace_back(static_cast<std::uint32_t>(i + 1), etags[i]);
    }
    auto etag = client::complete_upload_confirmed(*http, target, upload_id, parts, crc32c);
    if (!etag.ok()) abort_upload(target, upload_id);
    return etag;
  }

  // --- CUDA device memory (docs/gpu.md) -----------------------------------------------------
  // Bounce path: pinned staging pools registered once with the fabric, chunks copied with
  // cudaMemcpyAsync on the caller's stream. The CPU only ever touches the staging memory, also
  // when the server declines RDMA (the HTTP body lands in the staging slot).
  client::DeviceStaging staging;

  // Whether p (device memory) can take the direct path: plain device memory (managed memory
  // always bounces: its pages may migrate) and a fabric that registers CUDA memory itself.
  bool direct_capable(const void* p) {
    std::string reason;
    auto f = current_fabric(reason);
    if (!f) return false;
    transport::Capabilities caps;
    caps.cuda_memory = f->cuda_memory();
    return cuda::choose_path(cuda::classify_buffer(p), caps) == cuda::DevicePath::direct;
  }

  Result<client::DeviceStaging::Lease> lease_staging(std::size_t chunk_bytes) {
    return staging.acquire(chunk_bytes,
                           [this](std::span<std::byte> all) -> Result<std::shared_ptr<void>> {
                             std::string reason;
                             auto f = current_fabric(reason);
                             if (!f) return std::shared_ptr<void>();  // HTTP only: nothing
                             return f->pin(all.data(), all.size());
                           });
  }

  // Client::get's checks, then device_get (client.cc, after the helpers it uses).
  Result<TransferResult> device_get_call(std::string_view bucket, std::string_view key,
                                         std::span<std::byte> dst, std::optional<ByteRange> range,
                                         void* stream);

  // GET of `range` (or the whole object) into device memory dst.
  Result<TransferResult> device_get(const std::string& target, std::span<std::byte> dst,
                                    std::optional<ByteRange> range, cudaStream_t stream) {
    TransferResult res;
    res.memory = "cuda-bounce";
    const std::uint64_t base = range ? range->offset : 0;
    const std::uint64_t want = range ? range->length : dst.size();
    auto lease = lease_staging(cfg.part_size_bytes);
    if (!lease.ok()) return lease.status();
    cuda::BounceContext& ctx = **lease;
    const std::size_t chunk = ctx.pool().chunk_bytes();

    std::mutex mu;  // guards info and res.requests (chunks may be fetched on several threads)
    PathInfo info;
    std::uint64_t total = 0;

    // First chunk alone: it learns the object's size and the ETag that pins the other chunks.
    const std::size_t first_len = static_cast<std::size_t>(std::min<std::uint64_t>(want, chunk));
    auto first = ctx.get(
        dst.data(), first_len, stream,
        [&](const cuda::Chunk&, std::span<std::byte> staging_span,
            std::size_t) -> Result<std::size_t> {
          auto o = get_one(target, Piece{base, staging_span.size(), 0, 0}, staging_span, "");
          ++res.requests;
          if (!o.ok() && o.code() == Errc::invalid_range && !range) {
            // A ranged GET of an empty object: fetch it whole (it is empty or fits the slot).
            o = get_one(target, std::nullopt, staging_span, "");
            ++res.requests;
          }
          if (!o.ok()) return o.status();
          info.merge(o->info);
          res.etag = s3::unquote_etag(o->resp.header("etag").value_or(""));
          if (o->resp.status == 206) {
            auto cr = client::parse_content_range(o->resp.header("content-range").value_or(""));
            if (!cr) return Status(Errc::io_error, "206 reply without a valid Content-Range");
            if (cr->last - cr->first + 1 != o->bytes) {
              return Status(Errc::io_error, "reply carried " + std::to_string(o->bytes) +
                                                " bytes for a range of " +
                                                std::to_string(cr->last - cr->first + 1));
            }
            total = cr->total;
          } else {
            total = o->bytes;
            if (base > 0) return Status(Errc::io_error, "server ignored the Range header");
          }
          if (!range && total > dst.size()) {
            return Status(Errc::invalid_argument, "buffer of " + std::to_string(dst.size()) +
                                                      " bytes is too small for the " +
                                                      std::to_string(total) + "-byte object");
          }
          return static_cast<std::size_t>(o->bytes);
        });
    if (!first.ok()) return first.status();
    res.object_size = total;
    std::uint64_t got = first->bytes;
    const std::uint64_t end = range ? std::min(base + want, total) : total;
    if (got == first_len && base + got < end) {
      if (res.etag.empty()) return Status(Errc::io_error, "no ETag to pin a multi-part download");
      const std::uint64_t start = base + got;
      cuda::BounceOptions opts;
      opts.fetch_concurrency = std::max<std::size_t>(limits::client_staging_slots / 2, 1);
      auto rest = ctx.get(
          dst.data() + got, end - start, stream,
          [&](const cuda::Chunk& c, std::span<std::byte> staging_span,
              std::size_t) -> Result<std::size_t> {
            auto o =
                get_one(target, Piece{start + c.offset, c.length, 0, 0}, staging_span, res.etag);
            if (!o.ok()) return o.status();
            std::lock_guard lk(mu);
            ++res.requests;
            info.merge(o->info);
            if (o->bytes != c.length) {
              return Status(Errc::io_error, "part at " + std::to_string(start + c.offset) +
                                                " carried " + std::to_string(o->bytes) + " of " +
                                                std::to_string(c.length) + " bytes");
            }
            return static_cast<std::size_t>(o->bytes);
          },
          opts);
      if (!rest.ok()) return rest.status();
      got += rest->bytes;
    }
    res.bytes = got;
    info.fill(res);
    return res;
  }

  // PUT of device memory src: one PutObject up to the part size, else a multipart upload whose
  // parts are the staging chunks. Every request carries the CRC32C of its bytes, computed on the
  // staging chunk (host memory) and verified by the server.
  Result<TransferResult> device_put(const std::string& target, std::span<const std::byte> src,
                                    cudaStream_t stream) {
    auto plan = client::plan_upload(src.size(), cfg.part_size_bytes, cfg.multipart_threshold_bytes);
    if (!plan.ok()) return plan.status();
    TransferResult res;
    res.memory = "cuda-bounce";
    res.object_size = src.size();
    const std::size_t chunk = plan->multipart ? plan->part_size : cfg.part_size_bytes;
    auto lease = lease_staging(chunk);
    if (!lease.ok()) return lease.status();
    cuda::BounceContext& ctx = **lease;
    PathInfo info;
    std::string upload_id;
    if (plan->multipart) {
      auto id = create_upload(target, "CRC32C");
      ++res.requests;
      if (!id.ok()) return id.status();
      upload_id = std::move(*id);
    }
    std::vector<std::string> etags, crc32c;
    auto put = ctx.put(
        src.data(), src.size(), stream,
        [&](const cuda::Chunk& c, std::span<const std::byte> staging_span, std::size_t) -> Status {
          Checksummer sum(ChecksumAlgo::crc32c);
          sum.update(staging_span.data(), staging_span.size());
          if (plan->multipart) crc32c.push_back(sum.digest_base64());
          std::string t = target;
          if (plan->multipart) {
            t += "?partNumber=" + std::to_string(c.index + 1) +
                 "&uploadId=" + uri_encode(upload_id, true);
          }
          auto o = put_one(t, staging_span, sum.digest_base64());
          if (!o.ok()) return o.status();
          res.requests += o->requests;
          if (plan->multipart && o->etag.empty()) {
            return Status(Errc::io_error, "UploadPart reply has no ETag");
          }
          etags.push_back(std::move(o->etag));
          info.merge(o->info);
          return Status::Ok();
        });
    if (!put.ok()) {
      if (plan->multipart) abort_upload(target, upload_id);
      return put.status();
    }
    if (plan->multipart) {
      auto etag = complete_upload(target, upload_id, etags, crc32c);
      ++res.requests;
      if (!etag.ok()) return etag.status();
      res.etag = std::move(*etag);
    } else {
      res.etag = etags.empty() ? std::string() : etags.front();
    }
    res.bytes = put->bytes;
    info.fill(res);
    return res;
  }
};

// ------------------------------------------------------------------------------------------------

Result<std::unique_ptr<Client>> Client::create(ClientConfig config) {
  if (config.endpoint.empty()) {
    return Status(Errc::invalid_argument,
                  "no endpoint: set AWS_ENDPOINT_URL, endpoint_url in ~/.aws/config, or pass one");
  }
  auto ep = client::parse_endpoint(config.endpoint);
  if (!ep.ok()) return ep.status();
  if (config.part_size_bytes == 0) return Status(Errc::invalid_argument, "part size must be > 0");
  if (config.concurrency == 0) return Status(Errc::invalid_argument, "concurrency must be > 0");
  if (config.token_lifetime_s == 0 || config.token_lifetime_s > limits::token_lifetime_max_s) {
    return Status(Errc::invalid_argument, "token lifetime must be 1.." +
                                              std::to_string(limits::token_lifetime_max_s) + " s");
  }
  const std::string& f = config.fabric;
  const auto rows = client::fabric_rows();
  if (f != "auto" && f != "none" && client::fabrics_built_in() &&
      std::none_of(rows.begin(), rows.end(), [&](const auto& r) { return r.name == f; })) {
    std::string known = "auto, none";
    for (const auto& r : rows) known += ", " + r.name;
    return Status(Errc::invalid_argument, "unknown fabric '" + f + "' (" + known + ")");
  }
  std::string order_error;
  if (!client::parse_fabric_order(config.fabric_order, rows, order_error)) {
    return Status(Errc::invalid_argument, order_error);
  }
  if (config.fabric_failure_memory_ms > limits::client_fabric_failure_memory_ms_max) {
    return Status(Errc::invalid_argument,
                  "fabric failure memory must be at most " +
                      std::to_string(limits::client_fabric_failure_memory_ms_max) + " ms");
  }
  if (config.rdma != "auto" && config.rdma != "required" && config.rdma != "off") {
    return Status(Errc::invalid_argument,
                  "unknown rdma policy '" + config.rdma + "' (auto, required, off)");
  }
  if (config.rdma == "required" && f == "none") {
    return Status(Errc::invalid_argument, "rdma \"required\" needs a fabric (fabric is none)");
  }
  if (config.addressing_style != "path" && config.addressing_style != "virtual") {
    return Status(Errc::invalid_argument,
                  "unknown addressing_style '" + config.addressing_style + "' (path, virtual)");
  }
  if (config.redirects_max > limits::client_redirects_max) {
    return Status(Errc::invalid_argument,
                  "redirects_max must be at most " + std::to_string(limits::client_redirects_max));
  }
  if (!config.ca_bundle.empty() && ::access(config.ca_bundle.c_str(), R_OK) != 0) {
    return Status(Errc::invalid_argument,
                  "ca_bundle " + config.ca_bundle + " cannot be read: " + std::strerror(errno));
  }
  retry::Policy policy;
  if (auto m = retry::parse_mode(config.retry_mode)) {
    policy.mode = *m;
  } else {
    return Status(Errc::invalid_argument,
                  "unknown retry_mode '" + config.retry_mode + "' (standard, adaptive, legacy)");
  }
  policy.max_attempts = config.max_attempts;
  policy.base_delay = std::chrono::milliseconds(config.retry_base_delay_ms);
  policy.max_backoff = std::chrono::milliseconds(config.retry_max_backoff_ms);
  OBJDIRECT_RETURN_IF_ERROR(policy.validate());
  auto impl = std::make_unique<Impl>();
  impl->cfg = std::move(config);
  impl->endpoint = std::move(*ep);
  client::HttpOptions ho;
  ho.endpoint = impl->endpoint;
  ho.credentials = {impl->cfg.access_key, impl->cfg.secret_key};
  ho.session_token = impl->cfg.session_token;
  ho.region = impl->cfg.region;
  ho.connections_max = std::max<std::uint32_t>(impl->cfg.connections_max, 1);
  ho.connect_timeout = std::chrono::milliseconds(impl->cfg.connect_timeout_ms);
  ho.io_timeout = std::chrono::milliseconds(impl->cfg.io_timeout_ms);
  ho.stats = &impl->stats;
  ho.retry_policy = policy;
  ho.ca_bundle = impl->cfg.ca_bundle;
  ho.virtual_hosted = impl->cfg.addressing_style == "virtual";
  ho.redirects_max = impl->cfg.redirects_max;
  impl->http = std::make_unique<HttpClient>(std::move(ho));
  return std::unique_ptr<Client>(new Client(std::move(impl)));
}

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::~Client() = default;

const ClientConfig& Client::config() const noexcept {
  return impl_->cfg;
}

Result<MemoryHandle> Client::register_memory(void* ptr, std::size_t len) {
  if (ptr == nullptr || len == 0) {
    return Status(Errc::invalid_argument, "register_memory needs a non-empty buffer");
  }
  MemoryHandle h;
  h.ptr_ = ptr;
  h.size_ = len;
  h.pin_ = std::make_shared<MemoryHandle::Pin>();
  if (is_device_memory(ptr)) {
    // The bounce path moves device memory through the client's own staging buffers, which are
    // registered once; the device range itself is never handed to a fabric that cannot
    // register CUDA memory (nor touched by the CPU). The handle is still valid for get/put.
    return h;
  }
  std::string reason;
  if (auto f = impl_->current_fabric(reason)) {
    auto pinned = f->pin(ptr, len);
    if (!pinned.ok()) return pinned.status();
    h.pin_->hold = std::move(*pinned);
    h.pin_->fabrics.push_back(f->name());
  }
  return h;
}

Result<TransferResult> Client::get(std::string_view bucket, std::string_view key,
                                   const MemoryHandle& dst, std::optional<ByteRange> range) {
  return get(bucket, key, dst.span(), range);
}

Result<TransferResult> Client::Impl::device_get_call(std::string_view bucket, std::string_view key,
                                                     std::span<std::byte> dst,
                                                     std::optional<ByteRange> range, void* stream) {
  if (range && range->length == 0) {
    TransferResult res;
    res.reason = "empty range";
    res.memory = "cuda-bounce";
    return res;
  }
  if (range && dst.size() < range->length) {
    return Status(Errc::invalid_argument,
                  "buffer of " + std::to_string(dst.size()) + " bytes is smaller than the range");
  }
  return device_get(client::object_target(bucket, key), dst, range,
                    static_cast<cudaStream_t>(stream));
}

Result<TransferResult> Client::get(std::string_view bucket, std::string_view key,
                                   std::span<std::byte> dst, std::optional<ByteRange> range) {
  if (!dst.empty() && is_device_memory(dst.data())) return get_device(bucket, key, dst, range, {});
  return get_host(bucket, key, dst, range, false);
}

Result<TransferResult> Client::get_device(std::string_view bucket, std::string_view key,
                                          std::span<std::byte> dst, std::optional<ByteRange> range,
                                          void* cuda_stream) {
  std::string declined;
  if (impl_->direct_capable(dst.data())) {
    // GPUDirect RDMA: the host flow with the device range registered by the fabric.
    auto r = get_host(bucket, key, dst, range, true);
    if (r.ok()) r->memory = "cuda-direct";
    if (r.ok() || r.code() != Errc::rdma_declined) return r;
    declined = "GPUDirect declined (" + r.status().message() + "), bytes moved through staging";
  }
  // The staging pipeline (the CPU never touches dst).
  auto r = impl_->device_get_call(bucket, key, dst, range, cuda_stream);
  if (r.ok() && !declined.empty()) {
    r->reason = r->reason.empty() ? declined : declined + "; " + r->reason;
  }
  return r;
}

Result<TransferResult> Client::get_host(std::string_view bucket, std::string_view key,
                                        std::span<std::byte> dst, std::optional<ByteRange> range,
                                        bool direct, std::string_view if_match) {
  const std::string target = client::object_target(bucket, key);
  const std::uint64_t part = impl_->cfg.part_size_bytes;
  TransferResult res;
  PathInfo info;

  std::optional<Piece> first;
  if (range) {
    if (range->length == 0) {
      res.reason = "empty range";
      return res;
    }
    if (dst.size() < range->length) {
      return Status(Errc::invalid_argument,
                    "buffer of " + std::to_string(dst.size()) + " bytes is smaller than the range");
    }
    first = Piece{range->offset, std::min(range->length, part), 0, 0};
  } else if (dst.empty()) {
    // Nothing to read into: HEAD tells whether the object is empty. Never ask for a body the
    // buffer cannot hold (dropping a connection mid-body wastes the server's work).
    auto h = head(bucket, key);
    ++res.requests;
    if (!h.ok()) return h.status();
    if (h->size > 0) {
      return Status(Errc::invalid_argument,
                    "empty buffer for a " + std::to_string(h->size) + "-byte object");
    }
    res.etag = h->etag;
    res.reason = "empty transfer";
    return res;
  } else {
    // At most what the buffer holds: a larger object shows in Content-Range and is refused
    // without receiving bytes that have nowhere to go.
    first = Piece{0, std::min<std::uint64_t>(dst.size(), part), 0, 0};
  }

  // First request: learns the size and the ETag that pins the remaining parts.
  const std::string pin(if_match);
  auto o = impl_->get_one(target, first, first ? dst.subspan(0, first->length) : dst, pin, direct);
  ++res.requests;
  if (!o.ok() && o.code() == Errc::invalid_range && !range) {
    // A ranged GET of an empty object: fetch it whole.
    first.reset();
    o = impl_->get_one(target, std::nullopt, dst, pin, direct);
    ++res.requests;
  }
  if (!o.ok()) {
    if (o.code() == Errc::invalid_argument && !first) {
      return Status(Errc::invalid_argument, "buffer of " + std::to_string(dst.size()) +
                                                " bytes is too small for the object");
    }
    return o.status();
  }
  if (!range && o->resp.status == 200 && first) {
    // The server ignored Range and sent the whole object, which fitted (the sink refuses more).
    first.reset();
  }
  info.merge(o->info);
  res.etag = s3::unquote_etag(o->resp.header("etag").value_or(""));
  std::uint64_t got = o->bytes;
  std::uint64_t total = 0;
  if (o->resp.status == 206) {
    auto cr = client::parse_content_range(o->resp.header("content-range").value_or(""));
    if (!cr) return Status(Errc::io_error, "206 reply without a valid Content-Range");
    total = cr->total;
    if (cr->last - cr->first + 1 != got) {
      return Status(Errc::io_error, "reply carried " + std::to_string(got) +
                                        " bytes for a range of " +
                                        std::to_string(cr->last - cr->first + 1));
    }
  } else {
    // 200: the whole object arrived (the server may ignore Range).
    total = got;
    if (range && range->offset > 0) {
      return Status(Errc::io_error, "server ignored the Range header");
    }
  }
  res.object_size = total;

  std::uint64_t start = first ? first->offset + got : got;
  std::uint64_t end;
  if (range) {
    end = std::min(range->offset + range->length, total);
  } else {
    end = total;
    if (total > dst.size()) {
      return Status(Errc::invalid_argument, "buffer of " + std::to_string(dst.size()) +
                                                " bytes is too small for the " +
                                                std::to_string(total) + "-byte object");
    }
  }
  if (start < end) {
    if (res.etag.empty()) return Status(Errc::io_error, "no ETag to pin a multi-part download");
    const std::uint64_t base = range ? range->offset : 0;
    auto pieces = client::split_range(start, end - start, part, start - base);
    std::vector<PathInfo> infos(pieces.size());
    std::atomic<std::uint64_t> bytes{0};
    Status st = run_parallel(pieces.size(), impl_->cfg.concurrency, [&](std::size_t i) -> Status {
      const Piece& p = pieces[i];
      auto r = impl_->get_one(target, p, dst.subspan(p.buffer_offset, p.length), res.etag, direct);
      if (!r.ok()) return r.status();
      if (r->bytes != p.length) {
        return Status(Errc::io_error, "part at " + std::to_string(p.offset) + " carried " +
                                          std::to_string(r->bytes) + " of " +
                                          std::to_string(p.length) + " bytes");
      }
      infos[i] = std::move(r->info);
      bytes += r->bytes;
      return Status::Ok();
    });
    if (!st.ok()) return st;
    for (const auto& i : infos) info.merge(i);
    got += bytes.load();
    res.requests += static_cast<std::uint32_t>(pieces.size());
  }
  res.bytes = got;
  info.fill(res);
  impl_->stats.on_transfer(res);
  return res;
}

Result<TransferResult> Client::put(std::string_view bucket, std::string_view key,
                                   std::span<const std::byte> src) {
  if (!src.empty() && is_device_memory(src.data())) return put_device(bucket, key, src, {});
  return put_host(bucket, key, src, false);
}

Result<TransferResult> Client::put(std::string_view bucket, std::string_view key,
                                   std::span<const std::byte> src, const PutOptions& options) {
  if (options.content_type.empty() && options.metadata.empty()) return put(bucket, key, src);
  if (!src.empty() && is_device_memory(src.data())) {
    return Status(Errc::invalid_argument,
                  "PutOptions (content type, metadata) need host memory, not CUDA device memory");
  }
  return put_host(bucket, key, src, false, &options);
}

Result<TransferResult> Client::put_device(std::string_view bucket, std::string_view key,
                                          std::span<const std::byte> src, void* cuda_stream) {
  std::string declined;
  if (impl_->direct_capable(src.data())) {
    auto r = put_host(bucket, key, src, true);  // GPUDirect RDMA
    if (r.ok()) r->memory = "cuda-direct";
    if (r.ok() || r.code() != Errc::rdma_declined) return r;
    declined = "GPUDirect declined (" + r.status().message() + "), bytes moved through staging";
  }
  auto r = impl_->device_put(client::object_target(bucket, key), src,
                             static_cast<cudaStream_t>(cuda_stream));
  if (r.ok() && !declined.empty()) {
    r->reason = r->reason.empty() ? declined : declined + "; " + r->reason;
  }
  return r;
}

Result<TransferResult> Client::put_host(std::string_view bucket, std::string_view key,
                                        std::span<const std::byte> src, bool direct,
                                        const PutOptions* options) {
  const std::string target = client::object_target(bucket, key);
  client::Headers extra;
  if (options) {
    auto h = client::put_option_headers(*options);
    if (!h.ok()) return h.status();
    extra = std::move(*h);
  }
  auto plan = client::plan_upload(src.size(), impl_->cfg.part_size_bytes,
                                  impl_->cfg.multipart_threshold_bytes);
  if (!plan.ok()) return plan.status();
  TransferResult res;
  res.object_size = src.size();
  PathInfo info;
  if (!plan->multipart) {
    auto o = impl_->put_one(target, src, {}, direct, extra);
    if (!o.ok()) return o.status();
    res.bytes = src.size();
    res.etag = o->etag;
    res.requests = o->requests;
    o->info.fill(res);
    impl_->stats.on_transfer(res);
    return res;
  }

  auto created = impl_->create_upload(target, {}, extra);
  ++res.requests;
  if (!created.ok()) return created.status();
  const std::string upload_id = std::move(*created);
  const std::string uid = uri_encode(upload_id, true);

  const auto& parts = plan->parts;
  std::vector<std::string> etags(parts.size());
  std::vector<PathInfo> infos(parts.size());
  std::atomic<std::uint32_t> requests{0};
  Status st = run_parallel(parts.size(), impl_->cfg.concurrency, [&](std::size_t i) -> Status {
    const Piece& p = parts[i];
    auto o =
        impl_->put_one(target + "?partNumber=" + std::to_string(p.part_number) + "&uploadId=" + uid,
                       src.subspan(p.offset, p.length), {}, direct);
    if (!o.ok()) return o.status();
    requests += o->requests;
    if (o->etag.empty()) return Status(Errc::io_error, "UploadPart reply has no ETag");
    etags[i] = std::move(o->etag);
    infos[i] = std::move(o->info);
    return Status::Ok();
  });
  res.requests += requests.load();
  if (!st.ok()) {
    impl_->abort_upload(target, upload_id);
    return st;
  }
  auto done = impl_->complete_upload(target, upload_id, etags);
  ++res.requests;
  if (!done.ok()) return done.status();
  res.etag = std::move(*done);
  res.bytes = src.size();
  for (const auto& i : infos) info.merge(i);
  info.fill(res);
  impl_->stats.on_transfer(res);
  return res;
}

std::future<Result<TransferResult>> Client::get_async(std::string bucket, std::string key,
                                                      std::span<std::byte> dst,
                                                      std::optional<ByteRange> range) {
  return get_async(std::move(bucket), std::move(key), dst, range, nullptr);
}

std::future<Result<TransferResult>> Client::put_async(std::string bucket, std::string key,
                                                      std::span<const std::byte> src) {
  return put_async(std::move(bucket), std::move(key), src, nullptr);
}

std::future<Result<TransferResult>> Client::get_async(std::string bucket, std::string key,
                                                      std::span<std::byte> dst,
                                                      std::optional<ByteRange> range,
                                                      void* cuda_stream) {
  const int device = caller_device();
  return std::async(std::launch::async,
                    [this, bucket = std::move(bucket), key = std::move(key), dst, range, device,
                     cuda_stream]() -> Result<TransferResult> {
                      if (dst.empty() || !is_device_memory(dst.data())) {
                        return get(bucket, key, dst, range);
                      }
                      OBJDIRECT_RETURN_IF_ERROR(bind_device(device));
                      return get_device(bucket, key, dst, range, cuda_stream);
                    });
}

std::future<Result<TransferResult>> Client::put_async(std::string bucket, std::string key,
                                                      std::span<const std::byte> src,
                                                      void* cuda_stream) {
  const int device = caller_device();
  return std::async(std::launch::async,
                    [this, bucket = std::move(bucket), key = std::move(key), src, device,
                     cuda_stream]() -> Result<TransferResult> {
                      if (src.empty() || !is_device_memory(src.data())) {
                        return put(bucket, key, src);
                      }
                      OBJDIRECT_RETURN_IF_ERROR(bind_device(device));
                      return put_device(bucket, key, src, cuda_stream);
                    });
}

namespace {

// The address ranges of a batch's host buffers, merged where buffers touch or overlap: every
// byte of a merged range belongs to some buffer, so it is memory the caller owns and may be
// registered as one (an arena sliced end to end becomes one registration).
std::vector<std::span<std::byte>> batch_arenas(std::vector<std::span<std::byte>> bufs) {
  std::erase_if(bufs,
                [](std::span<std::byte> b) { return b.empty() || is_device_memory(b.data()); });
  std::sort(bufs.begin(), bufs.end(), [](auto a, auto b) { return a.data() < b.data(); });
  std::vector<std::span<std::byte>> out;
  for (auto b : bufs) {
    if (!out.empty() && b.data() <= out.back().data() + out.back().size()) {
      std::byte* end = std::max(out.back().data() + out.back().size(), b.data() + b.size());
      out.back() = {out.back().data(), static_cast<std::size_t>(end - out.back().data())};
    } else {
      out.push_back(b);
    }
  }
  return out;
}

}  // namespace

std::vector<std::shared_ptr<void>> Client::Impl::pin_batch(
    std::vector<std::span<std::byte>> bufs, const std::vector<std::uint64_t>& sizes) {
  std::vector<std::shared_ptr<void>> pins;
  // Only when some request of the batch would propose a token (the crossover and the policy).
  const bool any = std::any_of(sizes.begin(), sizes.end(),
                               [&](std::uint64_t n) { return rdma_skip_reason(n, false).empty(); });
  if (!any) return pins;
  std::string reason;
  auto f = current_fabric(reason);
  if (!f) return pins;
  for (auto a : batch_arenas(std::move(bufs))) {
    // A refused pin costs nothing more: each request then registers its own buffer as usual.
    if (auto p = f->pin(a.data(), a.size()); p.ok()) pins.push_back(std::move(*p));
  }
  return pins;
}

std::vector<Result<TransferResult>> Client::get_many(std::span<const GetRequest> requests) {
  std::vector<Result<TransferResult>> out(requests.size(), Status(Errc::internal, "not started"));
  std::vector<std::span<std::byte>> bufs;
  std::vector<std::uint64_t> sizes;
  for (const auto& r : requests) {
    bufs.push_back(r.dst);
    sizes.push_back(r.range ? std::min<std::uint64_t>(r.range->length, r.dst.size())
                            : r.dst.size());
  }
  const auto pins = impl_->pin_batch(std::move(bufs), sizes);
  (void)run_parallel(requests.size(), impl_->cfg.concurrency, [&](std::size_t i) -> Status {
    const auto& r = requests[i];
    if (r.if_match.empty()) {
      out[i] = get(r.bucket, r.key, r.dst, r.range);
    } else if (!r.dst.empty() && is_device_memory(r.dst.data())) {
      out[i] = Status(Errc::invalid_argument, "if_match needs host memory, not CUDA device memory");
    } else {
      out[i] = get_host(r.bucket, r.key, r.dst, r.range, false, r.if_match);
    }
    return Status::Ok();
  });
  return out;
}

std::vector<Result<TransferResult>> Client::put_many(std::span<const PutRequest> requests) {
  std::vector<Result<TransferResult>> out(requests.size(), Status(Errc::internal, "not started"));
  std::vector<std::span<std::byte>> bufs;
  std::vector<std::uint64_t> sizes;
  for (const auto& r : requests) {
    // Registered for the fabric's RDMA READ; never written through.
    bufs.push_back({const_cast<std::byte*>(r.src.data()), r.src.size()});
    sizes.push_back(r.src.size());
  }
  const auto pins = impl_->pin_batch(std::move(bufs), sizes);
  (void)run_parallel(requests.size(), impl_->cfg.concurrency, [&](std::size_t i) -> Status {
    const auto& r = requests[i];
    out[i] = put(r.bucket, r.key, r.src);
    return Status::Ok();
  });
  return out;
}

Result<std::vector<std::string>> Client::list_buckets() {
  auto body = impl_->xml_call("GET", "/");
  if (!body.ok()) return body.status();
  auto doc = s3::decode_list_buckets(*body);
  if (!doc.ok()) return client::reply_error(doc.status(), "ListBuckets");
  std::vector<std::string> names;
  names.reserve(doc->buckets.size());
  for (auto& b : doc->buckets) names.push_back(std::move(b.name));
  return names;
}

Result<ObjectInfo> Client::head(std::string_view bucket, std::string_view key) {
  HttpRequest req;
  req.method = "HEAD";
  req.target = client::object_target(bucket, key);
  auto r = impl_->http->execute(req);
  if (!r.ok()) return r.status();
  if (!r->ok()) {
    Status st = client::status_from_response(*r);
    if (r->status == 404)
      return Status(Errc::no_such_key, "no such object s3://" + std::string(bucket) + "/" +
                                           std::string(key) + client::request_id_note(*r));
    return st;
  }
  ObjectInfo info;
  if (!parse_u64(r->header("content-length").value_or(""), info.size)) {
    return Status(Errc::io_error, "HEAD reply without Content-Length");
  }
  info.etag = s3::unquote_etag(r->header("etag").value_or(""));
  info.last_modified = std::string(r->header("last-modified").value_or(""));
  info.content_type = std::string(r->header("content-type").value_or(""));
  for (const auto& [name, value] : r->headers) {
    if (name.size() > 11 && name.starts_with("x-amz-meta-")) info.metadata[name.substr(11)] = value;
  }
  return info;
}

Result<ListPage> Client::list(std::string_view bucket, const ListOptions& o) {
  std::string target = client::object_target(bucket, "") + "?list-type=2";
  if (!o.prefix.empty()) target += "&prefix=" + uri_encode(o.prefix, true);
  if (!o.delimiter.empty()) target += "&delimiter=" + uri_encode(o.delimiter, true);
  if (!o.continuation_token.empty()) {
    target += "&continuation-token=" + uri_encode(o.continuation_token, true);
  }
  target += "&max-keys=" + std::to_string(o.max_keys);
  auto body = impl_->xml_call("GET", target);
  if (!body.ok()) return body.status();
  auto doc = s3::decode_list_objects(*body);
  if (!doc.ok()) return client::reply_error(doc.status(), "ListObjectsV2");
  ListPage page;
  page.objects.reserve(doc->objects.size());
  for (auto& o : doc->objects) {
    ListEntry e;
    e.key = std::move(o.key);
    e.size = o.size;
    e.etag = std::move(o.etag);
    e.last_modified = std::move(o.last_modified);
    page.objects.push_back(std::move(e));
  }
  page.common_prefixes = std::move(doc->common_prefixes);
  page.is_truncated = doc->is_truncated;
  page.next_continuation_token = std::move(doc->next_continuation_token);
  return page;
}

Status Client::delete_object(std::string_view bucket, std::string_view key) {
  auto r = impl_->xml_call("DELETE", client::object_target(bucket, key));
  return r.status();
}

Status Client::create_bucket(std::string_view bucket) {
  std::string body;
  if (impl_->cfg.region != "us-east-1") {
    body = "<CreateBucketConfiguration><LocationConstraint>" + impl_->cfg.region +
           "</LocationConstraint></CreateBucketConfiguration>";
  }
  auto r = impl_->xml_call("PUT", client::object_target(bucket, ""), std::move(body));
  return r.status();
}

Status Client::delete_bucket(std::string_view bucket) {
  auto r = impl_->xml_call("DELETE", client::object_target(bucket, ""));
  return r.status();
}

ClientStats Client::stats() const {
  return impl_->stats.snapshot();
}

// --- hooks for client_ops.cc ---

client::HttpClient& Client::http() noexcept {
  return *impl_->http;
}

Result<TransferResult> Client::upload_part(std::string_view bucket, std::string_view key,
                                           std::string_view upload_id, std::uint32_t part_number,
                                           std::span<const std::byte> src) {
  if (part_number == 0 || part_number > limits::parts_max) {
    return Status(Errc::invalid_argument, "part number must be 1.." +
                                              std::to_string(limits::parts_max) + ", got " +
                                              std::to_string(part_number));
  }
  auto o = impl_->put_one(client::object_target(bucket, key) +
                              "?partNumber=" + std::to_string(part_number) +
                              "&uploadId=" + uri_encode(upload_id, true),
                          src);
  if (!o.ok()) return o.status();
  if (o->etag.empty()) return Status(Errc::io_error, "UploadPart reply has no ETag");
  TransferResult res;
  res.bytes = src.size();
  res.object_size = src.size();
  res.etag = std::move(o->etag);
  res.requests = o->requests;
  o->info.fill(res);
  return res;
}

}  // namespace objdirect
