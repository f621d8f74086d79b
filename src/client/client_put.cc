// Client::put and Client::Impl's PUT path: one PutObject / UploadPart request (a token first when
// RDMA is proposed; a server that ignored the token gets the body and no more tokens), the
// multipart steps (Create, the parallel parts, Complete confirmed by HEAD when its answer was
// lost, Abort on failure), the host flow, and UploadPart of explicit multipart uploads.
#include <atomic>

#include "client/client_impl.hpp"
#include "client/complete.hpp"
#include "client/s3_xml.hpp"
#include "common/limits.hpp"
#include "common/parallel.hpp"
#include "common/uri.hpp"

namespace objdirect {

using client::HttpClient;
using client::HttpRequest;
using client::HttpResponse;
using client::Piece;

using client::is_device_memory;

Result<Client::Impl::PutOutcome> Client::Impl::put_one(const std::string& target,
                                                       std::span<const std::byte> src,
                                                       const std::string& crc32c, bool direct,
                                                       const client::Headers& extra,
                                                       CallRoute call) {
  PutOutcome out;
  std::shared_ptr<void> hold;
  std::shared_ptr<client::Fabric> fabric_used;
  std::string token = try_token(src, Direction::upload, out.info, hold, fabric_used, direct, call);
  if (rdma_required(direct) && token.empty() && !src.empty()) {
    return Status(Errc::rdma_declined, out.info.reason);
  }
  if (!token.empty()) {
    HttpRequest req;
    client::HeadersWiper wipe{req.headers};
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
      out.info.reason = "server ignored x-amz-rdma-token (no x-amz-rdma-reply); re-sent with body";
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
  client::HeadersWiper wipe{req.headers};
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

Result<std::string> Client::Impl::xml_call(const std::string& method, const std::string& target,
                                           std::string body, const std::string& checksum_algorithm,
                                           const client::Headers& extra) {
  HttpRequest req;
  client::HeadersWiper wipe{req.headers};
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

Result<std::string> Client::Impl::create_upload(const std::string& target,
                                                const std::string& algorithm,
                                                const client::Headers& extra) {
  auto created = xml_call("POST", target + "?uploads", {}, algorithm, extra);
  if (!created.ok()) return created.status();
  auto init = s3::decode_initiate_multipart(*created);
  if (!init.ok()) return client::reply_error(init.status(), "CreateMultipartUpload");
  return std::move(init->upload_id);
}

void Client::Impl::abort_upload(const std::string& target, const std::string& upload_id) {
  (void)xml_call("DELETE", target + "?uploadId=" + uri_encode(upload_id, true));
}

Result<std::string> Client::Impl::complete_upload(const std::string& target,
                                                  const std::string& upload_id,
                                                  const std::vector<std::string>& etags,
                                                  const std::vector<std::string>& crc32c,
                                                  const client::Headers& sse) {
  std::vector<std::pair<std::uint32_t, std::string>> parts;
  parts.reserve(etags.size());
  for (std::size_t i = 0; i < etags.size(); ++i) {
    parts.emplace_back(static_cast<std::uint32_t>(i + 1), etags[i]);
  }
  auto etag = client::complete_upload_confirmed(*http, target, upload_id, parts, crc32c, sse);
  if (!etag.ok()) abort_upload(target, upload_id);
  return etag;
}

Result<TransferResult> Client::put(std::string_view bucket, std::string_view key,
                                   std::span<const std::byte> src) {
  if (!src.empty() && is_device_memory(src.data())) return impl_->put_device(bucket, key, src, {});
  return impl_->put_host(bucket, key, src, false);
}

Result<TransferResult> Client::put(std::string_view bucket, std::string_view key,
                                   std::span<const std::byte> src, const PutOptions& options) {
  if (options.content_type.empty() && options.metadata.empty() && !options.sse_c) {
    return put(bucket, key, src);
  }
  if (!src.empty() && is_device_memory(src.data())) {
    return Status(
        Errc::invalid_argument,
        "PutOptions (content type, metadata, SSE-C key) need host memory, not CUDA device memory");
  }
  return impl_->put_host(bucket, key, src, false, &options);
}

Result<TransferResult> Client::Impl::put_device(std::string_view bucket, std::string_view key,
                                                std::span<const std::byte> src, void* cuda_stream) {
  std::string declined;
  if (direct_capable(src.data())) {
    auto r = put_host(bucket, key, src, true);  // GPUDirect RDMA
    if (r.ok()) r->memory = "cuda-direct";
    if (r.ok() || r.code() != Errc::rdma_declined) return r;
    declined = "GPUDirect declined (" + r.status().message() + "), bytes moved through staging";
  }
  auto r =
      device_put(client::object_target(bucket, key), src, static_cast<cudaStream_t>(cuda_stream));
  if (r.ok() && !declined.empty()) {
    r->reason = r->reason.empty() ? declined : declined + "; " + r->reason;
  }
  return r;
}

Result<TransferResult> Client::Impl::put_host(std::string_view bucket, std::string_view key,
                                              std::span<const std::byte> src, bool direct,
                                              const PutOptions* options) {
  const std::string target = client::object_target(bucket, key);
  // extra: on the PutObject or the CreateMultipartUpload; sse (SSE-C) also on every part and
  // the Complete.
  client::SecretHeaders extra;
  client::SecretHeaders sse;
  if (options) {
    auto h = client::put_option_headers(*options);
    if (!h.ok()) return h.status();
    extra.h = std::move(*h);
    if (options->sse_c) {
      sse.h = client::sse_c_headers(*options->sse_c);
      extra.h.insert(extra.h.end(), sse.h.begin(), sse.h.end());
    }
  }
  auto plan = client::plan_upload(src.size(), cfg.part_size_bytes, cfg.multipart_threshold_bytes);
  if (!plan.ok()) return plan.status();
  TransferResult res;
  res.object_size = src.size();
  PathInfo info;
  // Which path: auto's measurements for this size, when they decide (auto_choice).
  const auto choice = auto_choice(src.size(), Direction::upload, direct);
  const CallRoute via = route(src.size(), choice);
  if (!plan->multipart) {
    auto o = put_one(target, src, {}, direct, extra.h, via);
    if (!o.ok()) return o.status();
    res.bytes = src.size();
    res.etag = o->etag;
    res.requests = o->requests;
    o->info.fill(res);
    stats.on_transfer(res);
    auto_learned(choice, res);
    return res;
  }

  auto created = create_upload(target, {}, extra.h);
  ++res.requests;
  if (!created.ok()) return created.status();
  const std::string upload_id = std::move(*created);
  const std::string uid = uri_encode(upload_id, true);

  const auto& parts = plan->parts;
  std::vector<std::string> etags(parts.size());
  std::vector<PathInfo> infos(parts.size());
  std::atomic<std::uint32_t> requests{0};
  Status st = run_parallel(
      parts.size(), cfg.concurrency,
      [&](std::size_t i) -> Status {
        const Piece& p = parts[i];
        auto o =
            put_one(target + "?partNumber=" + std::to_string(p.part_number) + "&uploadId=" + uid,
                    src.subspan(p.offset, p.length), {}, direct, sse.h, via);
        if (!o.ok()) return o.status();
        requests += o->requests;
        if (o->etag.empty()) return Status(Errc::io_error, "UploadPart reply has no ETag");
        etags[i] = std::move(o->etag);
        infos[i] = std::move(o->info);
        return Status::Ok();
      },
      &helpers);
  res.requests += requests.load();
  if (!st.ok()) {
    abort_upload(target, upload_id);
    return st;
  }
  auto done = complete_upload(target, upload_id, etags, {}, sse.h);
  ++res.requests;
  if (!done.ok()) return done.status();
  res.etag = std::move(*done);
  res.bytes = src.size();
  for (const auto& i : infos) info.merge(i);
  info.fill(res);
  stats.on_transfer(res);
  auto_learned(choice, res);
  return res;
}

Result<TransferResult> Client::Impl::upload_part(std::string_view bucket, std::string_view key,
                                                 std::string_view upload_id,
                                                 std::uint32_t part_number,
                                                 std::span<const std::byte> src,
                                                 const client::Headers& sse) {
  if (part_number == 0 || part_number > limits::parts_max) {
    return Status(Errc::invalid_argument, "part number must be 1.." +
                                              std::to_string(limits::parts_max) + ", got " +
                                              std::to_string(part_number));
  }
  auto o =
      put_one(client::object_target(bucket, key) + "?partNumber=" + std::to_string(part_number) +
                  "&uploadId=" + uri_encode(upload_id, true),
              src, {}, false, sse);
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

Result<TransferResult> Client::upload_part(std::string_view bucket, std::string_view key,
                                           std::string_view upload_id, std::uint32_t part_number,
                                           std::span<const std::byte> src) {
  return impl_->upload_part(bucket, key, upload_id, part_number, src, {});
}

Result<TransferResult> Client::upload_part(std::string_view bucket, std::string_view key,
                                           std::string_view upload_id, std::uint32_t part_number,
                                           std::span<const std::byte> src,
                                           const SseCustomerKey& sse_c) {
  if (!src.empty() && is_device_memory(src.data())) {
    return Status(Errc::invalid_argument,
                  "an SSE-C part needs host memory, not CUDA device memory");
  }
  client::SecretHeaders sse(client::sse_c_headers(sse_c));
  return impl_->upload_part(bucket, key, upload_id, part_number, src, sse.h);
}
}  // namespace objdirect
