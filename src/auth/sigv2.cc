#include "auth/sigv2.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <map>

#include "common/checksum.hpp"
#include "common/time.hpp"
#include "common/uri.hpp"

namespace objdirect::sigv2 {

namespace {

using sigv4::AuthContext;
using sigv4::RequestView;
using std::chrono::seconds;
using std::chrono::system_clock;

// Query parameters that are part of the canonical resource: the S3 sub-resources and response
// header overrides (the list botocore signs, a superset of the one AWS documents).
constexpr std::array<std::string_view, 36> kSubresources = {"accelerate",
                                                            "acl",
                                                            "analytics",
                                                            "cors",
                                                            "defaultObjectAcl",
                                                            "delete",
                                                            "inventory",
                                                            "lifecycle",
                                                            "location",
                                                            "logging",
                                                            "metrics",
                                                            "notification",
                                                            "object-lock",
                                                            "partNumber",
                                                            "policy",
                                                            "replication",
                                                            "requestPayment",
                                                            "response-cache-control",
                                                            "response-content-disposition",
                                                            "response-content-encoding",
                                                            "response-content-language",
                                                            "response-content-type",
                                                            "response-expires",
                                                            "restore",
                                                            "select",
                                                            "select-type",
                                                            "storageClass",
                                                            "tagging",
                                                            "torrent",
                                                            "uploadId",
                                                            "uploads",
                                                            "versionId",
                                                            "versioning",
                                                            "versions",
                                                            "website",
                                                            "ownershipControls"};

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

const std::string* find_header(const RequestView& req, std::string_view name) {
  for (const auto& [k, v] : req.headers) {
    if (lower(k) == name) return &v;
  }
  return nullptr;
}

struct RawParam {
  std::string_view name, value;
  bool has_value;
};

std::vector<RawParam> raw_params(std::string_view query) {
  std::vector<RawParam> out;
  while (!query.empty()) {
    std::size_t amp = query.find('&');
    std::string_view piece = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
    if (piece.empty()) continue;
    std::size_t eq = piece.find('=');
    if (eq == std::string_view::npos) {
      out.push_back({piece, {}, false});
    } else {
      out.push_back({piece.substr(0, eq), piece.substr(eq + 1), true});
    }
  }
  return out;
}

std::pair<std::string_view, std::string_view> split_target(std::string_view target) {
  std::size_t q = target.find('?');
  if (q == std::string_view::npos) return {target, {}};
  return {target.substr(0, q), target.substr(q + 1)};
}

Status malformed(std::string m) {
  return Status(Errc::authorization_header_malformed, std::move(m));
}

// Tries the path-style resource, then every dot-prefix of the Host as a virtual-hosted bucket.
Result<AuthContext> check(const RequestView& req, const sigv4::SecretLookup& secrets,
                          std::string_view access_key, std::string_view given_signature,
                          std::string_view date_or_expires, bool query_auth,
                          system_clock::time_point date) {
  auto secret = secrets(access_key);
  if (!secret) {
    return Status(Errc::invalid_access_key_id,
                  "The AWS Access Key Id you provided does not exist in our records.");
  }
  std::vector<std::string> buckets = {""};
  if (const std::string* host = find_header(req, "host")) {
    std::string_view h = *host;
    if (!h.empty() && h.front() != '[')
      h = h.substr(0, h.rfind(':') == std::string_view::npos ? h.size() : h.rfind(':'));
    bool ip = !h.empty() && std::all_of(h.begin(), h.end(),
                                        [](char c) { return (c >= '0' && c <= '9') || c == '.'; });
    for (std::size_t dot = h.find('.'); !ip && dot != std::string_view::npos;
         dot = h.find('.', dot + 1)) {
      buckets.emplace_back(h.substr(0, dot));
    }
  }
  // A bucket-level path-style request ("/bucket?list-type=2") is signed as "/bucket/".
  std::vector<std::string> targets = {std::string(req.target)};
  auto [path, query] = split_target(req.target);
  if (path.size() > 1 && path.find('/', 1) == std::string_view::npos) {
    std::string slashed(path);
    slashed.push_back('/');
    if (req.target.size() > path.size()) {
      slashed.push_back('?');
      slashed.append(query);
    }
    targets.push_back(std::move(slashed));
  }
  bool ok = false;
  for (const auto& bucket : buckets) {
    for (const auto& target : targets) {
      std::string sts =
          string_to_sign(req, date_or_expires, canonical_resource(target, bucket), query_auth);
      if (constant_time_equal(signature(*secret, sts), given_signature)) {
        ok = true;
        break;
      }
    }
    if (ok) break;
  }
  if (!ok) {
    return Status(Errc::signature_does_not_match,
                  "The request signature we calculated does not match the signature you provided. "
                  "Check your key and signing method.");
  }
  AuthContext ctx;
  ctx.access_key = std::string(access_key);
  ctx.amz_date = amz_date(date);
  ctx.presigned = query_auth;
  ctx.sigv2 = true;
  const std::string* payload = find_header(req, "x-amz-content-sha256");
  ctx.payload_hash = payload ? *payload : std::string(sigv4::kUnsignedPayload);
  // Everything SigV2 covers, so that "is header X signed?" checks keep working.
  for (const auto& [k, v] : req.headers) {
    std::string name = lower(k);
    bool covered = name.starts_with("x-amz-") || name == "content-md5" || name == "content-type" ||
                   (!query_auth && name == "date");
    if (covered && std::find(ctx.signed_headers.begin(), ctx.signed_headers.end(), name) ==
                       ctx.signed_headers.end()) {
      ctx.signed_headers.push_back(std::move(name));
    }
  }
  std::sort(ctx.signed_headers.begin(), ctx.signed_headers.end());
  return ctx;
}

}  // namespace

std::string canonical_resource(std::string_view target, std::string_view bucket) {
  auto [path, query] = split_target(target);
  std::string out;
  if (!bucket.empty()) {
    out.push_back('/');
    out += bucket;
  }
  out += path.empty() ? std::string_view("/") : path;
  std::vector<std::pair<std::string_view, std::string>> sub;
  for (const auto& p : raw_params(query)) {
    if (std::find(kSubresources.begin(), kSubresources.end(), p.name) == kSubresources.end()) {
      continue;
    }
    std::string value;
    if (p.has_value) {
      auto d = uri_decode(p.value);
      value.push_back('=');
      value.append(d ? std::string_view(*d) : p.value);
    }
    sub.emplace_back(p.name, std::move(value));
  }
  std::stable_sort(sub.begin(), sub.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (std::size_t i = 0; i < sub.size(); ++i) {
    out.push_back(i == 0 ? '?' : '&');
    out += sub[i].first;
    out += sub[i].second;
  }
  return out;
}

std::string string_to_sign(const RequestView& req, std::string_view date_or_expires,
                           std::string_view canonical_resource, bool query_auth) {
  auto [path, query] = split_target(req.target);
  (void)path;
  auto params = parse_query(query);
  auto standard = [&](std::string_view name) -> std::string {
    if (const std::string* h = find_header(req, name)) return std::string(trim(*h));
    if (query_auth) {
      for (const auto& [k, v] : params) {
        if (lower(k) == name) return std::string(trim(v));
      }
    }
    return {};
  };
  std::string out(req.method);
  out.push_back('\n');
  out += standard("content-md5");
  out.push_back('\n');
  out += standard("content-type");
  out.push_back('\n');
  out += date_or_expires;
  out.push_back('\n');
  std::map<std::string, std::string> amz;
  auto add = [&amz](std::string name, std::string_view value) {
    auto [it, fresh] = amz.try_emplace(std::move(name));
    if (!fresh) it->second.push_back(',');
    it->second += trim(value);
  };
  // Query auth: presigners move the x-amz-* headers into the query, and the request may repeat
  // them as headers; the query copy wins.
  if (query_auth) {
    for (const auto& [k, v] : params) {
      std::string name = lower(k);
      if (name.starts_with("x-amz-")) add(std::move(name), v);
    }
  }
  const std::size_t from_query = amz.size();
  std::map<std::string, std::string> query_names;
  if (from_query > 0) query_names = amz;
  for (const auto& [k, v] : req.headers) {
    std::string name = lower(k);
    if (name.starts_with("x-amz-") && !query_names.contains(name)) add(std::move(name), v);
  }
  for (const auto& [k, v] : amz) {
    out += k;
    out.push_back(':');
    out += v;
    out.push_back('\n');
  }
  out += canonical_resource;
  return out;
}

std::string signature(std::string_view secret, std::string_view string_to_sign) {
  return base64_encode(hmac_sha1(secret, string_to_sign));
}

Result<AuthContext> verify_header(const RequestView& req, std::string_view authorization,
                                  const sigv4::SecretLookup& secrets,
                                  system_clock::time_point now) {
  std::string_view a = trim(authorization);
  if (!a.starts_with("AWS ")) return malformed("Unsupported authorization type");
  a.remove_prefix(4);
  a = trim(a);
  std::size_t colon = a.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == a.size()) {
    return malformed("Authorization must be 'AWS <access-key>:<signature>'");
  }
  std::string_view access_key = a.substr(0, colon), sig = a.substr(colon + 1);
  std::string date_line;
  system_clock::time_point date;
  if (const std::string* xd = find_header(req, "x-amz-date")) {
    // x-amz-date may be an HTTP date (SigV2 clients) or ISO 8601 basic.
    auto t = parse_http_date(std::string(trim(*xd)));
    if (!t) t = parse_amz_date(std::string(trim(*xd)));
    if (!t) return malformed("x-amz-date is not a valid date");
    date = *t;  // the Date line of the string to sign stays empty
  } else if (const std::string* d = find_header(req, "date")) {
    auto t = parse_http_date(std::string(trim(*d)));
    if (!t) return malformed("Date header is not a valid HTTP date");
    date = *t;
    date_line = std::string(trim(*d));
  } else {
    return Status(Errc::access_denied,
                  "AWS authentication requires a valid Date or x-amz-date header");
  }
  auto skew = std::chrono::abs(std::chrono::duration_cast<seconds>(now - date));
  if (skew.count() > limits::clock_skew_max_s) {
    return Status(Errc::request_time_too_skewed,
                  "The difference between the request time and the server's time is too large.");
  }
  return check(req, secrets, access_key, sig, date_line, false, date);
}

Result<AuthContext> verify_query(const RequestView& req, const sigv4::SecretLookup& secrets,
                                 system_clock::time_point now) {
  auto [path, query] = split_target(req.target);
  (void)path;
  auto params = try_parse_query(query);
  if (!params) return malformed("Malformed percent-encoding in the query string");
  const std::string *ak = nullptr, *sig = nullptr, *expires = nullptr;
  for (const auto& [k, v] : *params) {
    const std::string** slot = k == "AWSAccessKeyId" ? &ak
                               : k == "Signature"    ? &sig
                               : k == "Expires"      ? &expires
                                                     : nullptr;
    if (slot == nullptr) continue;
    if (*slot != nullptr) return malformed("Repeated query parameter " + k);
    *slot = &v;
  }
  if (!ak || !sig || !expires || ak->empty() || sig->empty()) {
    return malformed("Query-string authentication requires AWSAccessKeyId, Signature and Expires");
  }
  std::int64_t expires_s = 0;
  auto [end, ec] = std::from_chars(expires->data(), expires->data() + expires->size(), expires_s);
  if (ec != std::errc() || end != expires->data() + expires->size() || expires_s < 0) {
    return malformed("Expires must be a number of seconds since the epoch");
  }
  auto when = system_clock::time_point{} + seconds{expires_s};
  if (now > when) return Status(Errc::access_denied, "Request has expired");
  if (when - now > seconds{limits::presign_expires_max_s + limits::clock_skew_max_s}) {
    return malformed("Expires must be less than a week in the future");
  }
  return check(req, secrets, *ak, *sig, *expires, true, when - seconds{0});
}

}  // namespace objdirect::sigv2
