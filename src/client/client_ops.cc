// Client operations that move no object bytes through the client: server-side copy
// (CopyObject, UploadPartCopy), DeleteObjects, and the control calls of explicit multipart
// uploads. Kept apart from client.cc's data paths.
#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>

#include "client/client_impl.hpp"
#include "client/complete.hpp"
#include "client/http_client.hpp"
#include "client/planner.hpp"
#include "client/s3_xml.hpp"
#include "common/checksum.hpp"
#include "common/limits.hpp"
#include "common/uri.hpp"
#include "objdirect/client.hpp"

namespace objdirect {

namespace {

using client::HttpRequest;

// Runs fn(0..n-1) on up to `width` threads (the caller's included); after the first error no new
// index starts, and that error is returned.
template <class Fn>
Status for_each_parallel(std::size_t n, std::uint32_t width, Fn&& fn) {
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex mu;
  Status first;
  auto worker = [&] {
    for (std::size_t i; !failed.load() && (i = next.fetch_add(1)) < n;) {
      Status st = fn(i);
      if (!st.ok()) {
        std::lock_guard lk(mu);
        if (first.ok()) first = st;
        failed = true;
      }
    }
  };
  const std::size_t threads = std::min<std::size_t>(n, std::max<std::uint32_t>(width, 1));
  std::vector<std::thread> pool;
  for (std::size_t t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (auto& th : pool) th.join();
  return first;
}

// Sends an XML-bodied (or empty) request; a non-2xx reply, or an <Error> inside a 200 (S3 does
// that for CompleteMultipartUpload and copies), is an error.
Result<std::string> xml_request(client::HttpClient& http, std::string method, std::string target,
                                std::string body = {},
                                std::vector<std::pair<std::string, std::string>> headers = {}) {
  HttpRequest req;
  client::HeadersWiper wipe{req.headers};
  req.method = std::move(method);
  req.target = std::move(target);
  req.headers = std::move(headers);
  req.send_content_length = req.method == "POST" || req.method == "PUT";
  req.body = std::as_bytes(std::span(body.data(), body.size()));
  req.xml_reply = true;
  if (!body.empty()) req.headers.emplace_back("content-type", "application/xml");
  auto r = http.execute(req);
  if (!r.ok()) return r.status();
  if (!r->ok()) return client::status_from_response(*r);
  if (r->body.find("<Error>") != std::string::npos) {
    if (auto err = s3::decode_error(r->body); err.ok()) {
      return Status(from_s3_code(err->code),
                    err->message + client::request_id_note(err->request_id));
    }
  }
  return std::move(r->body);
}

}  // namespace

Result<client::Headers> client::put_option_headers(const PutOptions& options) {
  // Control characters would end the header line (CR, LF) or be refused by the server.
  auto bad_char = [](std::string_view v) {
    return std::any_of(v.begin(), v.end(), [](char ch) {
      const auto u = static_cast<unsigned char>(ch);
      return (u < 0x20 && u != '\t') || u == 0x7f;
    });
  };
  auto token_char = [](char ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           std::string_view("!#$%&'*+-.^_`|~").find(ch) != std::string_view::npos;
  };
  Headers out;
  if (!options.content_type.empty()) {
    if (bad_char(options.content_type)) {
      return Status(Errc::invalid_argument, "content type has a control character");
    }
    out.emplace_back("content-type", options.content_type);
  }
  std::size_t bytes = 0;
  for (const auto& [name, value] : options.metadata) {
    if (name.empty() || !std::all_of(name.begin(), name.end(), token_char)) {
      return Status(Errc::invalid_argument,
                    "metadata name '" + name + "' is empty or not an HTTP token");
    }
    if (bad_char(value)) {
      return Status(Errc::invalid_argument,
                    "metadata value of '" + name + "' has a control character");
    }
    std::string lower = name;
    std::transform(lower.begin(), lower.end(), lower.begin(), [](char ch) {
      return ch >= 'A' && ch <= 'Z' ? static_cast<char>(ch + 32) : ch;
    });
    bytes += lower.size() + value.size();
    out.emplace_back("x-amz-meta-" + lower, value);
  }
  if (bytes > limits::user_metadata_bytes_max) {
    return Status(Errc::invalid_argument, "metadata is " + std::to_string(bytes) +
                                              " bytes (names and values), above " +
                                              std::to_string(limits::user_metadata_bytes_max));
  }
  return out;
}

Result<TransferResult> Client::copy(std::string_view src_bucket, std::string_view src_key,
                                    std::string_view dst_bucket, std::string_view dst_key) {
  return copy(src_bucket, src_key, dst_bucket, dst_key, CopyOptions{});
}

Result<TransferResult> Client::copy(std::string_view src_bucket, std::string_view src_key,
                                    std::string_view dst_bucket, std::string_view dst_key,
                                    const CopyOptions& options) {
  // SSE-C: the source's key as copy-source headers (and on its HEAD), the copy's as usual.
  client::SecretHeaders src_sse, src_head_sse, dst_sse;
  if (options.source_sse_c) {
    src_sse.h = client::sse_c_headers(*options.source_sse_c, true);
    src_head_sse.h = client::sse_c_headers(*options.source_sse_c);
  }
  if (options.sse_c) dst_sse.h = client::sse_c_headers(*options.sse_c);
  auto with_sse = [&](client::Headers h) {
    h.insert(h.end(), src_sse.h.begin(), src_sse.h.end());
    h.insert(h.end(), dst_sse.h.begin(), dst_sse.h.end());
    return h;
  };
  const std::uint64_t threshold = config().copy_multipart_threshold_bytes;
  if (threshold == 0 || threshold > limits::put_bytes_max) {
    return Status(Errc::invalid_argument, "copy_multipart_threshold_bytes must be 1.." +
                                              std::to_string(limits::put_bytes_max));
  }
  auto info = impl_->head(src_bucket, src_key, src_head_sse.h);
  if (!info.ok()) return info.status();
  const std::string target = client::object_target(dst_bucket, dst_key);
  const std::string source = client::object_target(src_bucket, src_key);
  TransferResult res;
  res.requests = 1;
  res.object_size = info->size;
  res.path = TransferPath::http;
  res.reason = "server-side copy";

  if (info->size <= threshold) {
    auto body = xml_request(*impl_->http, "PUT", target, {},
                            with_sse({{"x-amz-copy-source", source},
                                      {"x-amz-copy-source-if-match", "\"" + info->etag + "\""}}));
    ++res.requests;
    if (!body.ok()) return body.status();
    auto copied = s3::decode_copy_result(*body);
    if (!copied.ok()) return client::reply_error(copied.status(), "CopyObject");
    res.etag = std::move(copied->etag);
    res.bytes = info->size;
    return res;
  }

  auto plan = client::plan_upload(info->size, std::max(config().part_size_bytes, threshold));
  if (!plan.ok()) return plan.status();
  PutOptions create_options;
  create_options.sse_c = options.sse_c;
  auto upload_id = create_multipart_upload(dst_bucket, dst_key, create_options);
  ++res.requests;
  if (!upload_id.ok()) return upload_id.status();
  const std::string uid = uri_encode(*upload_id, true);
  std::vector<CompletedPart> parts(plan->parts.size());
  Status st = for_each_parallel(parts.size(), config().concurrency, [&](std::size_t i) -> Status {
    const client::Piece& p = plan->parts[i];
    auto body = xml_request(
        *impl_->http, "PUT",
        target + "?partNumber=" + std::to_string(p.part_number) + "&uploadId=" + uid, {},
        with_sse({{"x-amz-copy-source", source},
                  {"x-amz-copy-source-range", client::range_header(p.offset, p.length)},
                  {"x-amz-copy-source-if-match", "\"" + info->etag + "\""}}));
    if (!body.ok()) return body.status();
    auto copied = s3::decode_copy_result(*body);
    if (!copied.ok()) return client::reply_error(copied.status(), "UploadPartCopy");
    parts[i].part_number = p.part_number;
    parts[i].etag = std::move(copied->etag);
    return Status::Ok();
  });
  res.requests += static_cast<std::uint32_t>(parts.size());
  if (!st.ok()) {
    (void)abort_multipart_upload(dst_bucket, dst_key, *upload_id);
    return st;
  }
  auto done = options.sse_c ? complete_multipart_upload(dst_bucket, dst_key, *upload_id, parts,
                                                        *options.sse_c)
                            : complete_multipart_upload(dst_bucket, dst_key, *upload_id, parts);
  ++res.requests;
  if (!done.ok()) return done.status();
  res.etag = done->etag;
  res.bytes = info->size;
  return res;
}

Result<std::vector<Client::DeleteFailure>> Client::delete_objects(
    std::string_view bucket, std::span<const std::string> keys) {
  const std::size_t batches = (keys.size() + limits::delete_keys_max - 1) / limits::delete_keys_max;
  std::vector<std::vector<DeleteFailure>> failed(batches);
  const std::string target = client::object_target(bucket, "") + "?delete";
  Status st = for_each_parallel(batches, config().concurrency, [&](std::size_t b) -> Status {
    auto batch = keys.subspan(
        b * limits::delete_keys_max,
        std::min<std::size_t>(limits::delete_keys_max, keys.size() - b * limits::delete_keys_max));
    std::string xml = client::delete_objects_body(batch);
    Md5 md5;
    md5.update(xml.data(), xml.size());
    auto body = xml_request(*impl_->http, "POST", target, std::move(xml),
                            {{"content-md5", base64_encode(md5.raw())}});
    if (!body.ok()) return body.status();
    auto result = s3::decode_delete_result(*body);
    if (!result.ok()) return client::reply_error(result.status(), "DeleteObjects");
    for (auto& e : result->errors) {
      failed[b].push_back({std::move(e.key), Status(from_s3_code(e.code), std::move(e.message))});
    }
    return Status::Ok();
  });
  if (!st.ok()) return st;
  std::vector<DeleteFailure> out;
  for (auto& f : failed) std::move(f.begin(), f.end(), std::back_inserter(out));
  return out;
}

Result<std::string> Client::create_multipart_upload(std::string_view bucket, std::string_view key) {
  return create_multipart_upload(bucket, key, PutOptions{});
}

Result<std::string> Client::create_multipart_upload(std::string_view bucket, std::string_view key,
                                                    const PutOptions& options) {
  auto headers = client::put_option_headers(options);
  if (!headers.ok()) return headers.status();
  if (options.sse_c) {
    client::SecretHeaders sse(client::sse_c_headers(*options.sse_c));
    headers->insert(headers->end(), sse.h.begin(), sse.h.end());
  }
  auto body = xml_request(*impl_->http, "POST", client::object_target(bucket, key) + "?uploads", {},
                          std::move(*headers));
  if (!body.ok()) return body.status();
  auto init = s3::decode_initiate_multipart(*body);
  if (!init.ok()) return client::reply_error(init.status(), "CreateMultipartUpload");
  return std::move(init->upload_id);
}

Result<TransferResult> Client::complete_multipart_upload(std::string_view bucket,
                                                         std::string_view key,
                                                         std::string_view upload_id,
                                                         std::span<const CompletedPart> parts) {
  return impl_->complete_parts(bucket, key, upload_id, parts, {});
}

Result<TransferResult> Client::complete_multipart_upload(std::string_view bucket,
                                                         std::string_view key,
                                                         std::string_view upload_id,
                                                         std::span<const CompletedPart> parts,
                                                         const SseCustomerKey& sse_c) {
  client::SecretHeaders sse(client::sse_c_headers(sse_c));
  return impl_->complete_parts(bucket, key, upload_id, parts, sse.h);
}

Result<TransferResult> Client::Impl::complete_parts(std::string_view bucket, std::string_view key,
                                                    std::string_view upload_id,
                                                    std::span<const CompletedPart> parts,
                                                    const client::Headers& sse) {
  std::vector<std::pair<std::uint32_t, std::string>> numbered;
  numbered.reserve(parts.size());
  for (const auto& p : parts) numbered.emplace_back(p.part_number, p.etag);
  auto etag = client::complete_upload_confirmed(*http, client::object_target(bucket, key),
                                                std::string(upload_id), numbered, {}, sse);
  if (!etag.ok()) return etag.status();
  TransferResult res;
  res.etag = std::move(*etag);
  res.requests = 1;
  return res;
}

Result<std::string> Client::presign(std::string_view method, std::string_view bucket,
                                    std::string_view key, std::chrono::seconds expires) {
  if (method != "GET" && method != "HEAD" && method != "PUT" && method != "DELETE") {
    return Status(
        Errc::invalid_argument,
        "presign: method must be GET, HEAD, PUT or DELETE, got '" + std::string(method) + "'");
  }
  if (bucket.empty() || key.empty()) {
    return Status(Errc::invalid_argument, "presign needs a bucket and a key");
  }
  if (expires.count() < 1 || expires.count() > limits::presign_expires_max_s) {
    return Status(Errc::invalid_argument,
                  "presign: expiry must be 1.." + std::to_string(limits::presign_expires_max_s) +
                      " seconds (7 days), got " + std::to_string(expires.count()));
  }
  const ClientConfig& cfg = config();
  auto ep = client::parse_endpoint(cfg.endpoint);
  if (!ep.ok()) return ep.status();
  std::string target = client::object_target(bucket, key);
  std::string host = ep->host_header;
  if (cfg.addressing_style == "virtual") {
    // The bucket in the host ("bucket.HOST:PORT/key"), as requests go with this style; a bucket
    // that cannot be a DNS label stays path-style, as requests do (virtual_host_target).
    if (auto v = client::virtual_host_target(ep->host_header, target)) {
      host = std::move(v->first);
      target = std::move(v->second);
    }
  }
  if (!cfg.session_token.empty()) {
    target += "?X-Amz-Security-Token=" + uri_encode(cfg.session_token, true);
  }
  const std::string query =
      sigv4::presign(method, target, host, {cfg.access_key, cfg.secret_key}, cfg.region, expires,
                     std::chrono::system_clock::now(), &impl_->http->signing_keys());
  return (ep->tls ? "https://" : "http://") + host + query;
}

Status Client::abort_multipart_upload(std::string_view bucket, std::string_view key,
                                      std::string_view upload_id) {
  return xml_request(
             *impl_->http, "DELETE",
             client::object_target(bucket, key) + "?uploadId=" + uri_encode(upload_id, true))
      .status();
}

}  // namespace objdirect
