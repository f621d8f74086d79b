// CORS: Get/Put/DeleteBucketCors, the preflight OPTIONS request (answered before
// authentication, as browsers send it without credentials) and the Access-Control-* headers of
// actual requests from an allowed Origin (cors.hpp has the document and the matching rules;
// docs/s3-compatibility.md, "CORS").
#include "common/checksum.hpp"
#include "common/limits.hpp"
#include "s3/cors.hpp"
#include "server/s3/s3_internal.hpp"

namespace objdirect::s3 {

namespace {

constexpr std::string_view kCorsKey = "cors";

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) {
    if (!out.empty()) out += ", ";
    out += s;
  }
  return out;
}

// The Access-Control-* headers for a request from `origin` that `rule` allows.
std::vector<std::pair<std::string, std::string>> allow_headers(const CorsRule& rule,
                                                               std::string_view origin) {
  bool any_origin = false;
  for (const auto& o : rule.allowed_origins) any_origin = any_origin || o == "*";
  std::vector<std::pair<std::string, std::string>> h;
  h.emplace_back("Access-Control-Allow-Origin", any_origin ? "*" : std::string(origin));
  h.emplace_back("Access-Control-Allow-Methods", join(rule.allowed_methods));
  if (!any_origin) h.emplace_back("Access-Control-Allow-Credentials", "true");
  if (!rule.expose_headers.empty()) {
    h.emplace_back("Access-Control-Expose-Headers", join(rule.expose_headers));
  }
  if (rule.max_age_seconds) {
    h.emplace_back("Access-Control-Max-Age", std::to_string(*rule.max_age_seconds));
  }
  return h;
}

}  // namespace

Task<void> S3Service::Impl::bucket_cors(Ctx& c) {
  const auto method = c.req.method();
  using bhttp::verb;
  if (auto st = begin_bucket_document(c, "GetBucketCors", "PutBucketCors", "DeleteBucketCors");
      !st.ok())
    co_return co_await send_error(c, st);
  if (method == verb::get) {
    auto doc = stored_bucket_document(
        c, kCorsKey,
        Status(Errc::no_such_cors_configuration, "The CORS configuration does not exist"));
    if (!doc.ok()) co_return co_await send_error(c, doc.status());
    co_return co_await send_xml(c, bhttp::status::ok, *doc);
  }
  std::string document;
  if (method == verb::put) {
    auto body = co_await c.ex.read_body_string(limits::cors_body_bytes_max + 1);
    if (!body.ok()) co_return co_await send_error(c, body.status());
    if (auto st = check_content_md5(c, *body); !st.ok()) co_return co_await send_error(c, st);
    auto rules = parse_cors(*body);
    if (!rules.ok()) co_return co_await send_error(c, rules.status());
    document = cors_xml(*rules);  // stored canonical: what GetBucketCors answers
  }
  if (auto st = store->set_bucket_config(c.bucket, kCorsKey, std::move(document)); !st.ok())
    co_return co_await send_error(c, st);
  co_await send_empty(c, method == verb::put ? bhttp::status::ok : bhttp::status::no_content);
}

Task<void> S3Service::Impl::preflight(Ctx& c) {
  c.op = "PreflightRequest";
  auto origin = c.header("origin");
  if (!origin) {
    co_return co_await send_error(
        c, Status(Errc::bad_request, "Insufficient information. Origin request header needed."));
  }
  auto method = c.header("access-control-request-method");
  if (!method) {
    co_return co_await send_error(
        c, Status(Errc::bad_request, "Invalid Access-Control-Request-Method: null"));
  }
  // A missing bucket reads like one without CORS: an unauthenticated caller learns nothing.
  std::vector<CorsRule> rules;
  if (!c.bucket.empty()) {
    // bucket_config: a backend may serve it without a round trip (the gateway's cache).
    auto doc = store->bucket_config(c.bucket, kCorsKey);
    if (doc.ok()) {
      if (*doc) {
        auto parsed = parse_cors(**doc);
        if (!parsed.ok()) co_return co_await send_error(c, parsed.status());
        rules = std::move(*parsed);
      }
    } else if (doc.code() != Errc::no_such_bucket && doc.code() != Errc::not_implemented) {
      co_return co_await send_error(c, doc.status());
    }
  }
  if (rules.empty()) {
    co_return co_await send_error(
        c, Status(Errc::cors_forbidden, "CORSResponse: CORS is not enabled for this bucket."));
  }
  const std::string req_headers = c.header("access-control-request-headers").value_or("");
  const CorsRule* rule = match_cors(rules, *origin, *method, req_headers);
  if (rule == nullptr) {
    co_return co_await send_error(
        c, Status(Errc::cors_forbidden,
                  "CORSResponse: This CORS request is not allowed. This is usually because the "
                  "evalution of Origin, request method / Access-Control-Request-Method or "
                  "Access-Control-Request-Headers are not whitelisted by the resource's CORS "
                  "spec."));
  }
  http::Fields f = base_headers(c);
  for (const auto& [k, v] : allow_headers(*rule, *origin)) f.set(k, v);
  if (!req_headers.empty()) f.set("Access-Control-Allow-Headers", req_headers);
  f.set(bhttp::field::vary,
        "Origin, Access-Control-Request-Headers, Access-Control-Request-Method");
  if (!c.ex.body_done()) c.ex.close_after_response();
  (void)co_await c.ex.send(bhttp::status::ok, std::move(f), std::string());
}

void S3Service::Impl::add_cors_headers(Ctx& c) {
  auto origin = c.header("origin");
  if (!origin || c.bucket.empty()) return;
  auto doc = store->bucket_config(c.bucket, kCorsKey);
  if (!doc.ok() || !*doc) return;
  auto rules = parse_cors(**doc);
  if (!rules.ok()) return;
  const CorsRule* rule = match_cors(*rules, *origin, c.req.method_string(), "");
  if (rule == nullptr) return;
  c.cors_headers = allow_headers(*rule, *origin);
  c.cors_headers.emplace_back("Vary", "Origin");
}

}  // namespace objdirect::s3
