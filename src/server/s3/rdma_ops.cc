// The S3 side of the RDMA data plane: x-amz-rdma-token on GET, PUT and UploadPart.
// Protocol (docs/architecture.md): success answers x-amz-rdma-reply with Content-Length 0;
// a server without a usable transport declines with x-amz-rdma-reply: 501 and serves a GET over
// HTTP, while a declined PUT gets an error so that the client retries with a body.
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>

#include "server/rdma/rdma_engine.hpp"
#include "server/s3/s3_internal.hpp"
#include "token/token.hpp"

namespace objdirect::s3 {

namespace asio = boost::asio;

namespace {

std::uint64_t now_unix_s() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::seconds>(
                                        std::chrono::system_clock::now().time_since_epoch())
                                        .count());
}

// The token of this request: signed, well-formed, unexpired.
Result<token::Token> request_token(const Ctx& c) {
  bool signed_token = false;
  for (const auto& h : c.auth.signed_headers) signed_token |= h == "x-amz-rdma-token";
  if (!signed_token) {
    return Status(Errc::access_denied,
                  "x-amz-rdma-token must be included in the SigV4 SignedHeaders");
  }
  return token::decode(*c.header("x-amz-rdma-token"), now_unix_s());
}

// Runs a blocking engine call on the RDMA worker pool and resumes the request afterwards.
template <class F>
Task<Status> on_pool(asio::thread_pool& pool, F fn) {
  co_return co_await asio::co_spawn(
      pool, [fn = std::move(fn)]() mutable -> Task<Status> { co_return fn(); },
      asio::use_awaitable);
}

// The reason label of objdirect_rdma_declines_total for a can_serve() refusal.
const char* decline_reason(const rdma::RdmaEngine* engine) {
  if (engine == nullptr || !engine->enabled()) return "rdma-disabled";
  if (engine->retired_buffers_full()) return "retired-buffers-max";
  return "no-matching-transport";
}

}  // namespace

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
  if (!tok.ok()) {
    opts.metrics->rdma_error(std::string(s3_code(tok.code())));
    co_return co_await send_error(c, tok.status());
  }
  Status serve = rdma ? rdma->can_serve(*tok, true)
                      : Status(Errc::rdma_declined, "This server has no RDMA transport enabled");
  if (!serve.ok()) {
    opts.metrics->rdma_decline(decline_reason(rdma.get()));
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
  Status st = co_await on_pool(*rdma_pool, [this, &tok, &reader, offset, length] {
    return rdma->send(*tok, reader, offset, length);
  });
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
  co_await c.ex.send_header(status, std::move(headers), 0);
}

Task<Result<PayloadResult>> S3Service::Impl::rdma_receive(Ctx& c, storage::BlobWriter& dst,
                                                          std::uint64_t max_bytes,
                                                          std::optional<ChecksumAlgo> extra_algo) {
  auto tok = request_token(c);
  if (!tok.ok()) {
    opts.metrics->rdma_error(std::string(s3_code(tok.code())));
    co_return tok.status();
  }
  Status serve = rdma ? rdma->can_serve(*tok, false)
                      : Status(Errc::rdma_declined, "This server has no RDMA transport enabled");
  if (!serve.ok()) {
    opts.metrics->rdma_decline(decline_reason(rdma.get()));
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
  PayloadDigest digest(*declared, extra_algo, false);
  std::uint64_t received = 0;
  Status st = co_await on_pool(*rdma_pool, [&] {
    // Each chunk is hashed on the digest pool while it is written here; the engine reuses the
    // staging buffer only after the sink returns, so the sink waits for both.
    OverlappedDigest overlap(digest, digest_pool.get());
    return rdma->receive(*tok, [&](std::span<const std::byte> data) -> Status {
      received += data.size();
      overlap.start(data);
      Status written = dst.append(data);
      overlap.wait();
      return written;
    });
  });
  if (!st.ok()) {
    if (st.code() != Errc::slow_down && st.code() != Errc::no_space &&
        st.code() != Errc::io_error) {
      st = Status(Errc::rdma_transfer_failed, "RDMA read from the client failed: " + st.message());
    }
    opts.metrics->rdma_error(std::string(s3_code(st.code())));
    co_return st;
  }
  auto result = digest.finish(received, {}, c.header("content-md5"), declared->header_values);
  c.data_path = "rdma";
  c.rdma_bytes = received;
  if (result.ok()) c.rdma_reply = "200";
  co_return result;
}

}  // namespace objdirect::s3
