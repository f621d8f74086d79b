#include "server/s3/s3_service.hpp"

#include <openssl/rand.h>

#include <algorithm>
#include <atomic>
#include <boost/json.hpp>
#include <chrono>
#include <fstream>
#include <sstream>

#include "common/limits.hpp"
#include "common/time.hpp"
#include "common/uri.hpp"
#include "s3/documents.hpp"
#include "s3/names.hpp"
#include "s3/xml.hpp"
#include "server/rdma/rdma_engine.hpp"
#include "server/s3/s3_internal.hpp"

namespace objdirect::s3 {

namespace {

std::string new_request_id() {
  // 16 hex chars from a process-unique counter mixed with startup randomness: unique and cheap.
  static const std::uint64_t salt = [] {
    std::uint64_t s = 0;
    RAND_bytes(reinterpret_cast<unsigned char*>(&s), sizeof(s));
    return s;
  }();
  static std::atomic<std::uint64_t> counter{0};
  std::uint64_t v =
      salt ^ (counter.fetch_add(1, std::memory_order_relaxed) * 0x9E3779B97F4A7C15ull);
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out(16, '0');
  for (int i = 15; i >= 0; --i) {
    out[static_cast<std::size_t>(i)] = kHex[v & 0xF];
    v >>= 4;
  }
  return out;
}

std::string_view strip_port(std::string_view host) {
  if (!host.empty() && host.front() == '[') {  // [::1]:9000
    auto close = host.find(']');
    return close == std::string_view::npos ? host : host.substr(0, close + 1);
  }
  auto colon = host.rfind(':');
  return colon == std::string_view::npos ? host : host.substr(0, colon);
}

}  // namespace

bool Ctx::has_query(std::string_view name) const {
  for (const auto& [k, v] : query) {
    if (k == name) return true;
  }
  return false;
}

std::optional<std::string> Ctx::query_value(std::string_view name) const {
  for (const auto& [k, v] : query) {
    if (k == name) return v;
  }
  return std::nullopt;
}

std::optional<std::string> Ctx::header(std::string_view name) const {
  auto it = req.find(name);
  if (it == req.end()) return std::nullopt;
  return std::string(it->value());
}

bool Ctx::chunked() const {
  auto te = header("transfer-encoding");
  if (!te) return false;
  std::string lower = *te;
  for (auto& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return lower.find("chunked") != std::string::npos;
}

std::string Ctx::resource() const {
  std::string r = "/";
  r += bucket;
  if (!key.empty()) {
    r += "/";
    r += key;
  }
  // Control bytes (NUL above all) are not allowed in XML 1.0, not even as character references:
  // percent-encode them so that an error body about such a key stays well-formed.
  std::string out;
  for (const char ch : r) {
    const auto u = static_cast<unsigned char>(ch);
    if (u < 0x20 || u == 0x7F) {
      static constexpr char kHex[] = "0123456789ABCDEF";
      out += '%';
      out += kHex[u >> 4];
      out += kHex[u & 0xF];
    } else {
      out += ch;
    }
  }
  return out;
}

Result<std::map<std::string, User>> load_credentials_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status(Errc::invalid_argument, "cannot read credentials file " + path);
  std::map<std::string, User> users;
  std::string line;
  int lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    auto hash = line.find('#');
    if (hash != std::string::npos) line.resize(hash);
    std::istringstream ls(line);
    User u;
    if (!(ls >> u.access_key)) continue;
    std::string extra;
    if (!(ls >> u.secret_key) || (ls >> extra)) {
      return Status(Errc::invalid_argument,
                    path + ":" + std::to_string(lineno) + ": expected 'ACCESS_KEY SECRET_KEY'");
    }
    users[u.access_key] = u;
  }
  if (users.empty()) return Status(Errc::invalid_argument, path + ": no credentials");
  return users;
}

S3Service::S3Service(S3Options opts, std::shared_ptr<storage::ObjectStore> store)
    : impl_(std::make_unique<Impl>()) {
  impl_->opts = std::move(opts);
  impl_->store = std::move(store);
  if (impl_->opts.put_digest_threads > 0) {
    impl_->digest_pool = std::make_unique<boost::asio::thread_pool>(
        std::min(impl_->opts.put_digest_threads, limits::put_digest_threads_max));
  }
  if (!impl_->opts.metrics) impl_->opts.metrics = std::make_shared<metrics::Registry>();
  {
    // The challenge key never leaves this process: challenges are recomputed to verify them.
    unsigned char key[32];
    if (RAND_bytes(key, sizeof(key)) != 1) throw std::runtime_error("RAND_bytes failed");
    impl_->bind_key.assign(reinterpret_cast<const char*>(key), sizeof(key));
    const auto lifetime =
        std::min(impl_->opts.rdma_binding_lifetime_s, limits::rdma_binding_lifetime_max_s);
    impl_->bindings = std::make_unique<token::BindingTable>(
        std::clamp<std::size_t>(impl_->opts.rdma_bindings_max, 1, limits::rdma_bindings_max),
        std::chrono::seconds(std::max<std::uint32_t>(lifetime, 1)));
    impl_->replay = std::make_unique<token::ReplayCache>(
        std::clamp<std::size_t>(impl_->opts.rdma_replay_nonces_max, 1,
                                limits::rdma_replay_nonces_max),
        limits::token_lifetime_max_s + limits::token_clock_skew_max_s);
  }
  {
    // Declared with or without a fabric, like the RDMA engine's series (docs/metrics.md).
    Impl* impl = impl_.get();
    impl_->opts.metrics->add_counter(
        "objdirect_rdma_transfers_inline_total",
        "RDMA transfers of one chunk run on the I/O thread of their request, not the RDMA pool.",
        [impl] { return static_cast<double>(impl->rdma_inline_total.load()); });
  }
  if (impl_->opts.lifecycle_interval_ms > 0) {
    Impl* impl = impl_.get();
    auto& m = *impl_->opts.metrics;
    m.add_counter("objdirect_lifecycle_objects_expired_total",
                  "Objects deleted by lifecycle Expiration rules.",
                  [impl] { return static_cast<double>(impl->lc_expired.load()); });
    m.add_counter("objdirect_lifecycle_uploads_aborted_total",
                  "Multipart uploads aborted by lifecycle AbortIncompleteMultipartUpload rules.",
                  [impl] { return static_cast<double>(impl->lc_aborted.load()); });
    m.add_counter("objdirect_lifecycle_passes_total", "Passes of the lifecycle worker.",
                  [impl] { return static_cast<double>(impl->lc_passes.load()); });
    impl_->lc_thread = std::thread([impl] { impl->lifecycle_loop(); });
  }
  if (impl_->opts.access_log == "-") {
    impl_->access_log = stderr;
  } else if (!impl_->opts.access_log.empty()) {
    impl_->access_log = std::fopen(impl_->opts.access_log.c_str(), "a");
  }
}

metrics::Registry& S3Service::metrics() {
  return *impl_->opts.metrics;
}

S3Service::~S3Service() {
  if (impl_->lc_thread.joinable()) {
    {
      std::lock_guard lock(impl_->lc_mu);
      impl_->lc_stop = true;
    }
    impl_->lc_cv.notify_all();
    impl_->lc_thread.join();
  }
  if (impl_->rdma_pool) impl_->rdma_pool->join();
  if (impl_->digest_pool) impl_->digest_pool->join();
  if (impl_->access_log && impl_->access_log != stderr) std::fclose(impl_->access_log);
}

void S3Service::set_rdma(std::shared_ptr<rdma::RdmaEngine> rdma) {
  impl_->rdma = std::move(rdma);
  if (impl_->rdma && impl_->rdma->enabled() && !impl_->rdma_pool) {
    impl_->rdma_pool = std::make_unique<boost::asio::thread_pool>(impl_->opts.rdma_threads);
  }
}

std::string S3Service::error_body(Errc code, std::string_view message) {
  return error_xml(s3_code(code), message, "/", new_request_id());
}

boost::asio::awaitable<void> S3Service::handle(http::Exchange& ex) {
  const auto t0 = std::chrono::steady_clock::now();
  if (co_await impl_->serve_metrics(ex)) co_return;
  const auto& req = ex.request();
  Ctx c{ex, req, new_request_id(), {}, {}, {}, {}, req.method() == bhttp::verb::head, {}};
  std::string failure;
  try {
    // --- route: bucket and key from the path (or the Host for virtual-hosted style) ---
    std::string_view target = req.target();
    auto qpos = target.find('?');
    std::string_view raw_path = target.substr(0, qpos);
    if (qpos != std::string_view::npos) c.query = parse_query(target.substr(qpos + 1));
    auto path = uri_decode(raw_path);
    if (!path || path->empty() || path->front() != '/') {
      co_await impl_->send_error(c, Status(Errc::invalid_request, "Invalid request path"));
      co_return;
    }
    // AWS: a path that does not decode to UTF-8 is 400 InvalidURI.
    if (!is_valid_utf8(*path)) {
      co_await impl_->send_error(c, Status(Errc::invalid_uri, "Couldn't parse the specified URI."));
      impl_->finish_request(c, t0);
      co_return;
    }
    std::string_view host = strip_port(req[bhttp::field::host]);
    const std::string& domain = impl_->opts.domain;
    if (!domain.empty() && host.size() > domain.size() + 1 && host.ends_with(domain) &&
        host[host.size() - domain.size() - 1] == '.') {
      c.bucket = std::string(host.substr(0, host.size() - domain.size() - 1));
      c.key = path->substr(1);
    } else {
      std::string_view p = std::string_view(*path).substr(1);
      auto slash = p.find('/');
      c.bucket = std::string(p.substr(0, slash));
      if (slash != std::string_view::npos) c.key = std::string(p.substr(slash + 1));
    }

    // A CORS preflight carries no credentials: it is answered from the bucket's CORS rules alone.
    if (req.method() == bhttp::verb::options) {
      co_await impl_->preflight(c);
      impl_->finish_request(c, t0);
      co_return;
    }

    // --- authenticate ---
    // A request with no credentials at all is anonymous: it may do only what a bucket policy
    // allows to "*" (every operation authorises through check_bucket_access).
    const bool has_credentials = req.find(bhttp::field::authorization) != req.end() ||
                                 c.has_query("X-Amz-Algorithm") || c.has_query("X-Amz-Signature") ||
                                 c.has_query("X-Amz-Credential") || c.has_query("AWSAccessKeyId") ||
                                 c.has_query("Signature");
    if (!has_credentials) {
      c.auth.anonymous = true;
      const std::string sha = std::string(req["x-amz-content-sha256"]);
      if (sha.starts_with("STREAMING-AWS4-HMAC-SHA256")) {
        co_await impl_->send_error(
            c, Status(Errc::access_denied, "Anonymous requests cannot sign their payload"));
        impl_->finish_request(c, t0);
        co_return;
      }
      c.auth.payload_hash = sha;
      impl_->add_cors_headers(c);
      co_await impl_->dispatch(c);
      impl_->finish_request(c, t0);
      co_return;
    }
    sigv4::RequestView view;
    view.method = req.method_string();
    view.target = target;
    view.headers.reserve(16);
    for (const auto& f : req) {
      std::string name(f.name_string());
      for (auto& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      view.headers.emplace_back(std::move(name), std::string(f.value()));
    }
    const auto& users = impl_->opts.users;
    auto auth = sigv4::verify(
        view,
        [&users](std::string_view ak) -> std::optional<std::string> {
          auto it = users.find(std::string(ak));
          if (it == users.end()) return std::nullopt;
          return it->second.secret_key;
        },
        impl_->opts.region,
        impl_->opts.auth_clock ? impl_->opts.auth_clock() : std::chrono::system_clock::now(),
        &impl_->signing_keys);
    if (!auth.ok()) {
      co_await impl_->send_error(c, auth.status());
      co_return;
    }
    c.auth = std::move(*auth);
    impl_->add_cors_headers(c);
    co_await impl_->dispatch(c);
  } catch (const std::exception& e) {
    failure = std::string("internal error: ") + e.what();
  }
  // (co_await is not allowed inside a catch block.)
  if (!failure.empty() && !ex.response_started()) {
    ex.close_after_response();
    co_await impl_->send_error(c, Status(Errc::internal, failure));
  }
  impl_->finish_request(c, t0);
}

Task<void> S3Service::Impl::dispatch(Ctx& c) {
  const auto method = c.req.method();
  using bhttp::verb;
  if (c.bucket.empty()) {
    if (c.auth.anonymous) {
      c.op = "ListBuckets";
      co_return co_await send_error(c, Status(Errc::access_denied, "Access Denied"));
    }
    if (method == verb::get) co_return co_await run(c, "ListBuckets", &Impl::list_buckets);
    if (method == verb::post && c.has_query("rdma-bind") && c.header("x-amz-rdma-token")) {
      co_return co_await run(c, "RdmaBind", &Impl::rdma_bind);
    }
    co_return co_await send_error(
        c, Status(Errc::method_not_allowed,
                  "The specified method is not allowed against this resource"));
  }
  static constexpr std::string_view kUnsupportedBucketSub[] = {"website",
                                                               "logging",
                                                               "encryption",
                                                               "replication",
                                                               "notification",
                                                               "object-lock",
                                                               "accelerate",
                                                               "requestPayment",
                                                               "publicAccessBlock",
                                                               "analytics",
                                                               "metrics",
                                                               "inventory",
                                                               "intelligent-tiering",
                                                               "policyStatus",
                                                               "retention",
                                                               "legal-hold",
                                                               "torrent",
                                                               "restore",
                                                               "select"};
  if (c.has_query("tagging")) co_return co_await tagging(c);
  if (c.has_query("cors")) co_return co_await bucket_cors(c);
  if (c.has_query("policy")) co_return co_await bucket_policy(c);
  if (c.has_query("lifecycle")) co_return co_await bucket_lifecycle(c);
  if (c.has_query("acl")) co_return co_await acl(c);
  if (c.has_query("ownershipControls")) co_return co_await ownership_controls(c);
  // ACLs are disabled (BucketOwnerEnforced): a write asking for any other ACL is refused.
  if (method == verb::put || method == verb::post) {
    if (auto st = check_acl_headers(c); !st.ok()) co_return co_await send_error(c, st);
  }
  if (c.has_query("attributes")) {
    if (c.key.empty() || method != verb::get) {
      co_return co_await send_error(
          c, Status(Errc::method_not_allowed,
                    "The specified method is not allowed against this resource"));
    }
    co_return co_await run(c, "GetObjectAttributes", &Impl::get_object_attributes);
  }
  for (auto sub : kUnsupportedBucketSub) {
    if (c.has_query(sub)) {
      co_return co_await send_error(
          c, Status(Errc::not_implemented,
                    "ObjDirect does not implement the '" + std::string(sub) + "' subresource"));
    }
  }
  if (c.key.empty()) {
    switch (method) {
      case verb::put:
        if (c.has_query("versioning"))
          co_return co_await run(c, "PutBucketVersioning", &Impl::put_bucket_versioning);
        co_return co_await run(c, "CreateBucket", &Impl::create_bucket);
      case verb::delete_:
        co_return co_await run(c, "DeleteBucket", &Impl::delete_bucket);
      case verb::head:
        co_return co_await run(c, "HeadBucket", &Impl::head_bucket);
      case verb::get:
        if (c.has_query("location"))
          co_return co_await run(c, "GetBucketLocation", &Impl::get_bucket_location);
        if (c.has_query("versioning"))
          co_return co_await run(c, "GetBucketVersioning", &Impl::get_bucket_versioning);
        if (c.has_query("uploads"))
          co_return co_await run(c, "ListMultipartUploads", &Impl::list_uploads);
        if (c.has_query("versions")) {
          c.op = "ListObjectVersions";
          co_return co_await list_objects(c, 0);
        }
        if (c.query_value("list-type") == "2") {
          c.op = "ListObjectsV2";
          co_return co_await list_objects(c, 2);
        }
        c.op = "ListObjects";
        co_return co_await list_objects(c, 1);
      case verb::post:
        if (c.has_query("delete"))
          co_return co_await run(c, "DeleteObjects", &Impl::delete_objects);
        break;
      default:
        break;
    }
    co_return co_await send_error(
        c, Status(Errc::method_not_allowed,
                  "The specified method is not allowed against this resource"));
  }
  switch (method) {
    case verb::put:
      if (c.has_query("uploadId") || c.has_query("partNumber")) {
        if (c.header("x-amz-copy-source"))
          co_return co_await run(c, "UploadPartCopy", &Impl::upload_part_copy);
        co_return co_await run(c, "UploadPart", &Impl::upload_part);
      }
      if (c.header("x-amz-copy-source"))
        co_return co_await run(c, "CopyObject", &Impl::copy_object);
      co_return co_await run(c, "PutObject", &Impl::put_object);
    case verb::get:
      if (c.has_query("uploadId")) co_return co_await run(c, "ListParts", &Impl::list_parts);
      co_return co_await run(c, "GetObject", &Impl::get_object);
    case verb::head:
      co_return co_await run(c, "HeadObject", &Impl::get_object);
    case verb::delete_:
      if (c.has_query("uploadId"))
        co_return co_await run(c, "AbortMultipartUpload", &Impl::abort_upload);
      co_return co_await run(c, "DeleteObject", &Impl::delete_object);
    case verb::post:
      if (c.has_query("uploads"))
        co_return co_await run(c, "CreateMultipartUpload", &Impl::create_upload);
      if (c.has_query("uploadId"))
        co_return co_await run(c, "CompleteMultipartUpload", &Impl::complete_upload);
      break;
    default:
      break;
  }
  co_return co_await send_error(
      c, Status(Errc::method_not_allowed,
                "The specified method is not allowed against this resource"));
}

// ------------------------------------------------------------------------------------------------
// Responses: the one place where a Status becomes an S3 error.

http::Fields S3Service::Impl::base_headers(const Ctx& c) const {
  http::Fields f;
  f.set("x-amz-request-id", c.request_id);
  f.set("x-amz-id-2", c.request_id);
  if (!c.rdma_reply.empty()) f.set("x-amz-rdma-reply", c.rdma_reply);
  if (c.rdma_target_progress_none) f.set("x-amz-rdma-target-progress", "none");
  if (!c.rdma_challenge.empty()) f.set("x-amz-rdma-challenge", c.rdma_challenge);
  for (const auto& [k, v] : c.cors_headers) f.set(k, v);
  for (const auto& [k, v] : c.version_headers) f.set(k, v);
  if (rdma && rdma->enabled()) {
    f.set("x-amz-rdma-fabrics", rdma->offered());
    // Which kernel serves them: a client proposes shared memory only on its own (token_format.md).
    if (const auto& id = transport::host_identity(); !id.empty()) f.set("x-amz-rdma-host-id", id);
  }
  return f;
}

Task<bool> S3Service::Impl::serve_metrics(http::Exchange& ex) {
  const auto& req = ex.request();
  if (req.method() != bhttp::verb::get) co_return false;
  std::string_view target = req.target();
  if (target != "/metrics" && !target.starts_with("/metrics?")) co_return false;
  // Signed requests for /metrics are S3 requests for a bucket named "metrics".
  if (req.find(bhttp::field::authorization) != req.end() ||
      target.find("X-Amz-Signature") != std::string_view::npos) {
    co_return false;
  }
  http::Fields f;
  if (!metrics::metrics_allowed(ex.remote_address(), opts.metrics_allow)) {
    f.set(bhttp::field::content_type, "application/xml");
    (void)co_await ex.send(bhttp::status::forbidden, std::move(f),
                           error_xml("AccessDenied", "/metrics is not allowed from this address",
                                     "/metrics", new_request_id()));
    co_return true;
  }
  f.set(bhttp::field::content_type, "text/plain; version=0.0.4");
  (void)co_await ex.send(bhttp::status::ok, std::move(f), opts.metrics->render());
  co_return true;
}

void S3Service::Impl::finish_request(Ctx& c, std::chrono::steady_clock::time_point t0) {
  auto latency = std::chrono::steady_clock::now() - t0;
  int status = c.ex.response_status();
  opts.metrics->record_request(c.op, status, latency);
  const bool rdma_path = c.data_path == "rdma";
  const bool outbound = c.op == "GetObject" || c.op == "GetObjectVersion";
  std::uint64_t in = c.ex.body_bytes_read() + (rdma_path && !outbound ? c.rdma_bytes : 0);
  std::uint64_t out = c.ex.body_bytes_sent() + (rdma_path && outbound ? c.rdma_bytes : 0);
  if (in) opts.metrics->add_bytes("in", c.data_path, in);
  if (out) opts.metrics->add_bytes("out", c.data_path, out);
  if (!access_log) return;
  boost::json::object o;
  o["time"] = iso8601_ms(std::chrono::system_clock::now());
  o["request_id"] = c.request_id;
  o["remote"] = c.ex.remote_address();
  o["user"] = c.auth.access_key;
  o["op"] = c.op;
  o["bucket"] = c.bucket;
  o["key"] = c.key;
  o["status"] = status;
  if (!c.error_code.empty()) o["error"] = c.error_code;
  o["bytes_in"] = in;
  o["bytes_out"] = out;
  o["path"] = c.data_path;
  o["duration_ms"] = std::chrono::duration<double, std::milli>(latency).count();
  std::string line = boost::json::serialize(o);
  line += '\n';
  std::lock_guard lock(access_log_mu);
  std::fwrite(line.data(), 1, line.size(), access_log);
  std::fflush(access_log);
}

Task<void> S3Service::Impl::send_error(Ctx& c, const Status& st) {
  co_await send_error(c, st, std::vector<std::pair<std::string, std::string>>());
}

Task<void> S3Service::Impl::send_error(Ctx& c, const Status& st,
                                       std::vector<std::pair<std::string, std::string>> details) {
  c.error_code = std::string(s3_code(st.code()));
  http::Fields f = base_headers(c);
  auto status = static_cast<bhttp::status>(http_status(st.code()));
  std::string message = st.message().empty() ? std::string(s3_code(st.code())) : st.message();
  if (st.code() == Errc::slow_down) f.set(bhttp::field::retry_after, "1");
  // An error before the body was read: the rest of the body is still on the wire.
  if (!c.ex.body_done()) c.ex.close_after_response();
  if (c.is_head || st.code() == Errc::not_modified) {
    // HEAD errors and 304 carry no body (RFC 9110); clients read the status alone.
    (void)co_await c.ex.send_header(status, std::move(f), 0);
    co_return;
  }
  f.set(bhttp::field::content_type, "application/xml");
  ErrorDocument doc{std::string(s3_code(st.code())), std::move(message), c.resource(), c.request_id,
                    std::move(details)};
  (void)co_await c.ex.send(status, std::move(f), encode_error(doc));
}

Task<void> S3Service::Impl::send_xml(Ctx& c, bhttp::status status, std::string xml,
                                     http::Fields extra) {
  http::Fields f = base_headers(c);
  for (const auto& h : extra) f.set(h.name_string(), h.value());
  f.set(bhttp::field::content_type, "application/xml");
  (void)co_await c.ex.send(status, std::move(f), std::move(xml));
}

Task<void> S3Service::Impl::send_empty(Ctx& c, bhttp::status status, http::Fields extra) {
  http::Fields f = base_headers(c);
  for (const auto& h : extra) f.set(h.name_string(), h.value());
  (void)co_await c.ex.send(status, std::move(f), std::string());
}

}  // namespace objdirect::s3
