// The S3 side of the RDMA data plane: x-amz-rdma-token on GET, PUT and UploadPart.
// Protocol: docs/rdma_protocol.md. Success answers x-amz-rdma-reply with Content-Length 0; a
// token this server cannot serve (another provider's format such as cuObject's DC_V1, another
// version of ours, a transport not enabled) is declined with x-amz-rdma-reply: 501, a GET then
// served over HTTP, a PUT refused so that the client retries with a body. Before any byte moves
// a token is admitted (admit_token): its nonce is accepted once, and its endpoint must be bound
// to the request's signer, proved by a read of the token's mailbox.
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <cstring>

#include "common/blocking.hpp"
#include "server/rdma/rdma_engine.hpp"
#include "server/s3/s3_internal.hpp"
#include "token/binding.hpp"
#include "token/token.hpp"

namespace objdirect::s3 {

namespace asio = boost::asio;

namespace {

std::uint64_t now_unix_s() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::seconds>(
                                        std::chrono::system_clock::now().time_since_epoch())
                                        .count());
}

// The token of this request: signed, ours, well-formed, unexpired. A token of another format
// (no "OD1." prefix: cuObject's DC_V1 descriptor of 81 hex digits, hipObject's, ...) or another
// version of ours is Errc::rdma_declined: this server cannot serve it, the client's fallback
// must work (docs/rdma_protocol.md, "Decline").
Result<token::Token> request_token(const Ctx& c) {
  bool signed_token = false;
  for (const auto& h : c.auth.signed_headers) signed_token |= h == "x-amz-rdma-token";
  if (!signed_token) {
    return Status(Errc::access_denied,
                  "x-amz-rdma-token must be included in the SigV4 SignedHeaders");
  }
  const std::string text = *c.header("x-amz-rdma-token");
  if (!std::string_view(text).starts_with(token::text_prefix)) {
    return Status(Errc::rdma_declined,
                  "x-amz-rdma-token is not an ObjDirect token (no \"OD1.\" prefix); this server "
                  "serves only its own token format");
  }
  return token::decode(text, now_unix_s());
}

// Counts a refused token (before any byte moved) by reason and by S3 code.
Status refused(metrics::Registry& m, const char* reason, Status st) {
  m.rdma_refusal(reason);
  m.rdma_error(std::string(s3_code(st.code())));
  return st;
}

// Counts a token that request_token() did not accept (other than a decline).
void count_bad_token(metrics::Registry& m, const Status& st) {
  if (st.code() == Errc::rdma_token_expired) m.rdma_refusal("expired");
  m.rdma_error(std::string(s3_code(st.code())));
}

// Runs a blocking engine call on the RDMA worker pool and resumes the request afterwards.
template <class F>
Task<Status> on_pool(asio::thread_pool& pool, F fn) {
  co_return co_await asio::co_spawn(
      pool, [fn = std::move(fn)]() mutable -> Task<Status> { co_return fn(); },
      asio::use_awaitable);
}

// Runs a blocking engine transfer of `length` bytes. One of a single chunk runs here, on the
// I/O thread, in a BlockingScope, while fewer than `inline_max` do: it usually ends within
// tens of microseconds (shm copies as it posts), and the pool's two thread hand-offs cost a
// small GET about as much server CPU as the rest of its transfer (docs/BENCHMARKS.md,
// optimisation 12). One that blocks longer (a slow client, an admission wait) gets a spare
// I/O thread in its place after the hand-off delay, and the bound keeps stalled clients from
// holding more I/O threads than that. Everything else runs on the pool.
template <class F>
Task<Status> run_transfer(const rdma::RdmaEngine& engine, asio::thread_pool& pool,
                          std::atomic<unsigned>& inline_now, std::atomic<std::uint64_t>& total,
                          unsigned inline_max, std::uint64_t length, F fn) {
  if (engine.one_chunk(length)) {
    struct Taken {
      std::atomic<unsigned>& n;
      ~Taken() { n.fetch_sub(1, std::memory_order_acq_rel); }
    };
    const bool here = inline_now.fetch_add(1, std::memory_order_acq_rel) < inline_max;
    const Taken taken{inline_now};
    if (here) {
      total.fetch_add(1, std::memory_order_relaxed);
      const BlockingScope blocking;
      co_return fn();
    }
  }
  co_return co_await on_pool(pool, std::move(fn));
}

// The reason label of objdirect_rdma_declines_total for a can_serve() refusal.
const char* decline_reason(const rdma::RdmaEngine* engine) {
  if (engine == nullptr || !engine->enabled()) return "rdma-disabled";
  if (engine->retired_buffers_full()) return "retired-buffers-max";
  return "no-matching-transport";
}

}  // namespace

Task<Status> S3Service::Impl::admit_token(Ctx& c, const token::Token& t) {
  metrics::Registry& m = *opts.metrics;
  if (c.auth.anonymous || c.auth.access_key.empty()) {
    co_return Status(Errc::access_denied, "An RDMA token needs a signed request");
  }
  const std::uint64_t now = now_unix_s();
  // Single use first: a token refused for any later reason is spent as well, so that a captured
  // one can never be tried again.
  switch (replay->admit(t.nonce, t.expires_unix_s, now)) {
    case token::ReplayCache::Result::replayed:
      co_return refused(m, "replayed-nonce",
                        Status(Errc::rdma_token_replayed,
                               "This x-amz-rdma-token was already used: each token's nonce is "
                               "accepted once. Build a new token (fresh nonce) for every request "
                               "(docs/rdma_protocol.md)"));
    case token::ReplayCache::Result::full:
      co_return refused(m, "replay-cache-full",
                        Status(Errc::slow_down,
                               "Too many RDMA tokens are still unexpired; retry shortly or send "
                               "the payload over HTTP"));
    case token::ReplayCache::Result::accepted:
      break;
  }
  const std::string key = token::binding_key(t);
  const std::string& principal = c.auth.access_key;
  const auto steady_now = token::BindingTable::Clock::now();
  const auto state = bindings->find(key, principal, steady_now);
  if (state == token::BindingTable::State::bound) co_return Status::Ok();
  const std::uint64_t window = now / limits::rdma_challenge_window_s;
  if (t.mailbox && t.proof_ready && rdma) {
    auto user = opts.users.find(principal);
    token::Proof got{};
    Status read = co_await on_pool(
        *rdma_pool, [&] { return rdma->read_mailbox(t, std::as_writable_bytes(std::span(got))); });
    if (!read.ok() && (read.code() == Errc::transport_error || read.code() == Errc::timeout ||
                       read.code() == Errc::rdma_transfer_failed)) {
      // The fabric could not reach the endpoint (an unreachable address fails at once): that is
      // a transfer failure, which tells the client to skip this fabric against this server, not
      // a binding refusal it could answer with another proof.
      co_return Status(Errc::rdma_transfer_failed,
                       "RDMA read of the token's mailbox failed: " + read.message());
    }
    if (read.ok() && user != opts.users.end()) {
      // The current window's challenge or the previous one's (a proof may straddle a boundary).
      for (std::uint64_t w : {window, window - 1}) {
        const token::Challenge ch = token::server_challenge(bind_key, w, key, principal);
        if (token::proof_equal(got, token::bind_proof(user->second.secret_key, ch, t.endpoint))) {
          bindings->bind(key, principal, steady_now);
          co_return Status::Ok();
        }
      }
    }
  }
  const bool other = state == token::BindingTable::State::other_principal;
  if (!t.mailbox) {
    co_return refused(
        m, other ? "bound-to-other-principal" : "unbound-endpoint",
        Status(Errc::rdma_endpoint_unbound,
               "The RDMA endpoint in x-amz-rdma-token is not bound to access key " + principal +
                   " and the token names no mailbox to prove it with; send the "
                   "payload over HTTP or use a client that binds "
                   "(docs/rdma_protocol.md)"));
  }
  c.rdma_challenge =
      token::encode_challenge(token::server_challenge(bind_key, window, key, principal));
  co_return refused(
      m, other ? "bound-to-other-principal" : "unbound-endpoint",
      Status(Errc::rdma_endpoint_unbound,
             std::string(other ? "The RDMA endpoint in x-amz-rdma-token is bound to another "
                                 "access key"
                               : "The RDMA endpoint in x-amz-rdma-token has not proved that it "
                                 "belongs to access key " +
                                     principal) +
                 ". Write HMAC-SHA256(HMAC-SHA256(secret key, \"objdirect-rdma-bind-v1\"), "
                 "challenge || endpoint) of the x-amz-rdma-challenge in this reply into the "
                 "token's mailbox and retry with a new token that has proof_ready set "
                 "(docs/rdma_protocol.md, \"Endpoint binding\")"));
}

Task<void> S3Service::Impl::rdma_bind(Ctx& c) {
  auto tok = request_token(c);
  if (!tok.ok()) {
    if (tok.code() == Errc::rdma_declined) {
      opts.metrics->rdma_decline("foreign-token");
      c.rdma_reply = "501";
    } else {
      count_bad_token(*opts.metrics, tok.status());
    }
    co_return co_await send_error(c, tok.status());
  }
  Status serve = rdma ? rdma->can_serve(*tok, false)
                      : Status(Errc::rdma_declined, "This server has no RDMA transport enabled");
  if (!serve.ok()) {
    opts.metrics->rdma_decline(decline_reason(rdma.get()));
    c.rdma_reply = "501";
    co_return co_await send_error(c, serve);
  }
  Status st = co_await admit_token(c, *tok);
  if (!st.ok()) co_return co_await send_error(c, st);
  c.rdma_reply = "204";
  co_await send_empty(c, bhttp::status::no_content);
}

Task<Result<PayloadResult>> S3Service::Impl::receive(Ctx& c, storage::BlobWriter& dst,
                                                     std::uint64_t max_bytes,
                                                     std::optional<ChecksumAlgo> extra_algo) {
  if (c.header("x-amz-rdma-token")) co_return co_await rdma_receive(c, dst, max_bytes, extra_algo);
  co_return co_await receive_payload(c, opts.io_buffer_bytes, dst, max_bytes, extra_algo,
                                     digest_pool.get());
}

Task<void> S3Service::Impl::send_put_error(Ctx& c, const Status& st) {
  if (st.code() == Errc::rdma_declined) c.rdma_reply = "501";
  co_await send_error(c, st);
}

Task<void> S3Service::Impl::rdma_get(Ctx& c, storage::ObjectReader& reader, bhttp::status status,
                                     http::Fields headers, std::uint64_t offset,
                                     std::uint64_t length) {
  auto tok = request_token(c);
  if (!tok.ok() && tok.code() != Errc::rdma_declined) {
    count_bad_token(*opts.metrics, tok.status());
    co_return co_await send_error(c, tok.status());
  }
  Status serve = !tok.ok() ? tok.status()
                 : rdma    ? rdma->can_serve(*tok, true)
                        : Status(Errc::rdma_declined, "This server has no RDMA transport enabled");
  if (!serve.ok()) {
    opts.metrics->rdma_decline(!tok.ok() ? "foreign-token" : decline_reason(rdma.get()));
    c.data_path = "http-fallback";
    // Decline: the client reads the body as from any S3 server.
    headers.set("x-amz-rdma-reply", "501");
    auto st = co_await c.ex.send_header(status, std::move(headers), length);
    if (!st.ok()) co_return;
    st = co_await send_object_body(c, reader, offset, length, opts.io_buffer_bytes);
    if (!st.ok()) c.ex.close_after_response();
    co_return;
  }
  if (auto st = token::check_scope(*tok, length); !st.ok()) {
    opts.metrics->rdma_error(std::string(s3_code(st.code())));
    co_return co_await send_error(c, st);
  }
  if (auto st = co_await admit_token(c, *tok); !st.ok()) co_return co_await send_error(c, st);
  bool no_client_polls = false;
  Status st = co_await run_transfer(
      *rdma, *rdma_pool, rdma_inline_now, rdma_inline_total, opts.rdma_inline_transfers_max, length,
      [this, &tok, &reader, offset, length, &no_client_polls] {
        return rdma->send(*tok, reader, offset, length, &no_client_polls);
      });
  if (!st.ok() && st.code() != Errc::slow_down && st.code() != Errc::invalid_rdma_token &&
      st.code() != Errc::io_error && st.code() != Errc::precondition_failed &&
      st.code() != Errc::unavailable && st.code() != Errc::no_such_key) {
    // The endpoint's transport state was torn down (the engine drops a failed peer): so is its
    // binding; it proves itself again on its next token.
    bindings->drop(token::binding_key(*tok));
  }
  if (!st.ok()) {
    // Storage errors keep their code (a gateway's object replaced upstream mid-read is 412,
    // an unreachable upstream 503); only transport failures become RDMATransferFailed.
    if (st.code() != Errc::slow_down && st.code() != Errc::invalid_rdma_token &&
        st.code() != Errc::io_error && st.code() != Errc::precondition_failed &&
        st.code() != Errc::unavailable && st.code() != Errc::no_such_key) {
      st = Status(Errc::rdma_transfer_failed, "RDMA write to the client failed: " + st.message());
    }
    opts.metrics->rdma_error(std::string(s3_code(st.code())));
    co_return co_await send_error(c, st);
  }
  c.data_path = "rdma";
  c.rdma_bytes = length;
  headers.set("x-amz-rdma-reply", status == bhttp::status::partial_content ? "206" : "200");
  headers.set("x-amz-rdma-bytes-transferred", std::to_string(length));
  if (no_client_polls) headers.set("x-amz-rdma-target-progress", "none");
  co_await c.ex.send_header(status, std::move(headers), 0);
}

Task<Result<PayloadResult>> S3Service::Impl::rdma_receive(Ctx& c, storage::BlobWriter& dst,
                                                          std::uint64_t max_bytes,
                                                          std::optional<ChecksumAlgo> extra_algo) {
  auto tok = request_token(c);
  if (!tok.ok() && tok.code() != Errc::rdma_declined) {
    count_bad_token(*opts.metrics, tok.status());
    co_return tok.status();
  }
  Status serve = !tok.ok() ? tok.status()
                 : rdma    ? rdma->can_serve(*tok, false)
                        : Status(Errc::rdma_declined, "This server has no RDMA transport enabled");
  if (!serve.ok()) {
    opts.metrics->rdma_decline(!tok.ok() ? "foreign-token" : decline_reason(rdma.get()));
    co_return Status(Errc::rdma_declined, serve.message() + "; retry with the data in the body");
  }
  // The payload comes by RDMA: the HTTP body must be empty.
  if (auto cl = c.header("content-length"); (cl && *cl != "0") || c.chunked()) {
    co_return Status(Errc::invalid_request,
                     "A request with x-amz-rdma-token must have an empty body (Content-Length: 0)");
  }
  if (tok->total_length > max_bytes) {
    co_return Status(Errc::entity_too_large,
                     "Your proposed upload exceeds the maximum allowed size of " +
                         std::to_string(max_bytes) + " bytes");
  }
  auto declared = declared_checksums(c);
  if (!declared.ok()) co_return declared.status();
  if (declared->trailer_algo) {
    co_return Status(Errc::invalid_request, "x-amz-trailer cannot be used with x-amz-rdma-token");
  }
  if (auto st = co_await admit_token(c, *tok); !st.ok()) co_return st;
  PayloadDigest digest(*declared, extra_algo, false);
  std::uint64_t received = 0;
  bool no_client_polls = false;
  Status st = co_await run_transfer(*rdma, *rdma_pool, rdma_inline_now, rdma_inline_total,
                                    opts.rdma_inline_transfers_max, tok->total_length, [&] {
                                      // Each chunk is hashed on the digest pool while it is written
                                      // here; the engine reuses the staging buffer only after the
                                      // sink returns, so the sink waits for both.
                                      OverlappedDigest overlap(digest, digest_pool.get());
                                      return rdma->receive(
                                          *tok,
                                          [&](std::span<const std::byte> data) -> Status {
                                            received += data.size();
                                            overlap.start(data);
                                            Status written = dst.append(data);
                                            overlap.wait();
                                            return written;
                                          },
                                          &no_client_polls);
                                    });
  if (!st.ok()) {
    if (st.code() != Errc::slow_down && st.code() != Errc::no_space &&
        st.code() != Errc::io_error) {
      bindings->drop(token::binding_key(*tok));  // the endpoint's transport state is gone
      st = Status(Errc::rdma_transfer_failed, "RDMA read from the client failed: " + st.message());
    }
    opts.metrics->rdma_error(std::string(s3_code(st.code())));
    co_return st;
  }
  auto result = digest.finish(received, {}, c.header("content-md5"), declared->header_values);
  c.data_path = "rdma";
  c.rdma_bytes = received;
  if (result.ok()) {
    c.rdma_reply = "200";
    c.rdma_target_progress_none = no_client_polls;
  }
  co_return result;
}

}  // namespace objdirect::s3
