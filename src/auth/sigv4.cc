#include "auth/sigv4.hpp"

#include <openssl/crypto.h>

#include <algorithm>

#include "auth/sigv2.hpp"
#include "common/checksum.hpp"
#include "common/time.hpp"
#include "common/uri.hpp"

namespace objdirect::sigv4 {

namespace {

using std::chrono::seconds;
using std::chrono::system_clock;

constexpr std::string_view kTerminator = "aws4_request";
constexpr std::string_view kService = "s3";

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Trimmed, with each inner run of spaces/tabs collapsed to one space (SigV4 "Trimall").
void append_trimall(std::string& out, std::string_view v) {
  v = trim(v);
  bool in_space = false;
  for (char c : v) {
    if (c == ' ' || c == '\t') {
      in_space = true;
      continue;
    }
    if (in_space) out.push_back(' ');
    in_space = false;
    out.push_back(c);
  }
}

// Header names are compared case-insensitively: RequestView asks for lower-case names, but a
// caller that slips (a client passing "Content-Type") must not produce a signature that silently
// disagrees with the server's.
bool name_equals(std::string_view a, std::string_view lower_b) {
  if (a.size() != lower_b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    char c = a[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != lower_b[i]) return false;
  }
  return true;
}

const std::string* find_header(const RequestView& req, std::string_view name) {
  for (const auto& [k, v] : req.headers) {
    if (name_equals(k, name)) return &v;
  }
  return nullptr;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  while (true) {
    std::size_t p = s.find(sep);
    out.push_back(s.substr(0, p));
    if (p == std::string_view::npos) break;
    s.remove_prefix(p + 1);
  }
  return out;
}

bool is_lower_hex(std::string_view s) {
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

std::string to_lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

std::pair<std::string_view, std::string_view> split_target(std::string_view target) {
  std::size_t q = target.find('?');
  if (q == std::string_view::npos) return {target, {}};
  return {target.substr(0, q), target.substr(q + 1)};
}

std::string canonical_uri(std::string_view raw_path) {
  if (raw_path.empty()) return "/";
  auto decoded = uri_decode(raw_path);
  // A path with a malformed escape cannot be canonicalised; encoding it raw makes the signature
  // fail rather than match by accident.
  return uri_encode(decoded ? *decoded : std::string(raw_path), false);
}

std::string canonical_query(std::string_view raw_query, bool presigned_query) {
  std::vector<std::pair<std::string, std::string>> enc;
  for (auto& [name, value] : parse_query(raw_query)) {
    if (presigned_query && name == "X-Amz-Signature") continue;
    enc.emplace_back(uri_encode(name, true), uri_encode(value, true));
  }
  std::sort(enc.begin(), enc.end());
  std::string out;
  for (const auto& [n, v] : enc) {
    if (!out.empty()) out.push_back('&');
    out += n;
    out.push_back('=');
    out += v;
  }
  return out;
}

Status malformed(std::string message) {
  return Status(Errc::authorization_header_malformed, std::move(message));
}

// The parsed pieces common to header and presigned auth.
struct Parsed {
  std::string access_key;
  std::string scope_date, scope_region, scope_service;
  std::vector<std::string> signed_headers;
  std::string signature;  // lower-case hex
  std::string amz_date;   // ISO 8601 basic
  system_clock::time_point date;
};

Status parse_credential(std::string_view cred, std::string_view region, Parsed& p) {
  auto parts = split(cred, '/');
  if (parts.size() != 5 || parts[0].empty()) {
    return malformed("Credential must be <access-key>/<date>/<region>/<service>/aws4_request");
  }
  p.access_key = std::string(parts[0]);
  p.scope_date = std::string(parts[1]);
  p.scope_region = std::string(parts[2]);
  p.scope_service = std::string(parts[3]);
  if (parts[4] != kTerminator) return malformed("Credential scope must end in aws4_request");
  if (p.scope_service != kService) {
    return malformed("Credential scope service must be 's3', not '" + p.scope_service + "'");
  }
  if (p.scope_region.empty() || (!region.empty() && p.scope_region != region)) {
    return malformed("The authorization header is malformed; the region '" + p.scope_region +
                     "' is wrong; expecting '" + std::string(region) + "'");
  }
  return Status::Ok();
}

Status parse_signed_headers(std::string_view list, Parsed& p) {
  auto names = split(list, ';');
  if (names.size() > limits::signed_headers_max) return malformed("Too many SignedHeaders");
  for (auto n : names) {
    if (n.empty()) return malformed("Empty name in SignedHeaders");
    for (char c : n) {
      if (c <= ' ' || c >= 0x7f || (c >= 'A' && c <= 'Z') || c == ':') {
        return malformed("SignedHeaders must be lower-case header names");
      }
    }
    if (std::find(p.signed_headers.begin(), p.signed_headers.end(), n) != p.signed_headers.end()) {
      return malformed("Repeated name in SignedHeaders");
    }
    p.signed_headers.emplace_back(n);
  }
  if (std::find(p.signed_headers.begin(), p.signed_headers.end(), "host") ==
      p.signed_headers.end()) {
    return malformed("SignedHeaders must include host");
  }
  return Status::Ok();
}

Status parse_signature(std::string_view sig, Parsed& p) {
  std::string lower = to_lower(sig);
  if (lower.size() != 64 || !is_lower_hex(lower)) {
    return malformed("Signature must be 64 hexadecimal digits");
  }
  p.signature = std::move(lower);
  return Status::Ok();
}

Status parse_amz_date_into(std::string_view text, Parsed& p) {
  auto t = parse_amz_date(text);
  if (!t) return malformed("X-Amz-Date must be in the form YYYYMMDDTHHMMSSZ");
  p.date = *t;
  p.amz_date = std::string(text);
  return Status::Ok();
}

Status parse_authorization(std::string_view value, std::string_view region, Parsed& p) {
  value = trim(value);
  std::size_t sp = value.find(' ');
  std::string_view algo = value.substr(0, sp);
  if (algo != kAlgorithm) {
    return malformed("Unsupported authorization type; only AWS4-HMAC-SHA256 is accepted");
  }
  if (sp == std::string_view::npos) return malformed("Authorization header has no parameters");
  std::string_view cred, signed_headers, signature;
  bool have_cred = false, have_sh = false, have_sig = false;
  for (auto item : split(value.substr(sp + 1), ',')) {
    item = trim(item);
    std::size_t eq = item.find('=');
    if (eq == std::string_view::npos) return malformed("Authorization parameter without '='");
    std::string_view k = item.substr(0, eq), v = item.substr(eq + 1);
    bool* seen = nullptr;
    if (k == "Credential") {
      cred = v, seen = &have_cred;
    } else if (k == "SignedHeaders") {
      signed_headers = v, seen = &have_sh;
    } else if (k == "Signature") {
      signature = v, seen = &have_sig;
    } else {
      return malformed("Unknown Authorization parameter '" + std::string(k) + "'");
    }
    if (*seen) return malformed("Repeated Authorization parameter '" + std::string(k) + "'");
    *seen = true;
  }
  if (!have_cred || !have_sh || !have_sig) {
    return malformed("Authorization header needs Credential, SignedHeaders and Signature");
  }
  OBJDIRECT_RETURN_IF_ERROR(parse_credential(cred, region, p));
  OBJDIRECT_RETURN_IF_ERROR(parse_signed_headers(signed_headers, p));
  return parse_signature(signature, p);
}

bool valid_payload_hash(std::string_view v) {
  if (v.size() == 64) return is_lower_hex(to_lower(v));
  return v == kUnsignedPayload || v == kStreamingSigned || v == kStreamingSignedTrailer ||
         v == kStreamingUnsignedTrailer;
}

// `canonical_payload` goes into the canonical request; `payload_hash` is what the handlers see.
Result<AuthContext> finish(const RequestView& req, const SecretLookup& secrets, Parsed& p,
                           std::string_view canonical_payload, std::string payload_hash,
                           bool presigned, SigningKeyCache* keys) {
  if (p.amz_date.compare(0, 8, p.scope_date) != 0 || p.scope_date.size() != 8) {
    return Status(Errc::authorization_header_malformed, "Credential scope date " + p.scope_date +
                                                            " does not match the request date " +
                                                            p.amz_date.substr(0, 8));
  }
  auto secret = secrets(p.access_key);
  if (!secret) {
    return Status(Errc::invalid_access_key_id,
                  "The AWS Access Key Id you provided does not exist in our records.");
  }
  std::string canonical = canonical_request(req, p.signed_headers, canonical_payload, presigned);
  std::string scope = credential_scope(p.scope_date, p.scope_region, p.scope_service);
  std::string key = keys != nullptr
                        ? keys->get(*secret, p.scope_date, p.scope_region, p.scope_service)
                        : signing_key(*secret, p.scope_date, p.scope_region, p.scope_service);
  std::string expected = signature_hex(key, string_to_sign(p.amz_date, scope, canonical));
  if (!constant_time_equal(expected, p.signature)) {
    return Status(Errc::signature_does_not_match,
                  "The request signature we calculated does not match the signature you provided. "
                  "Check your key and signing method.");
  }
  AuthContext ctx;
  ctx.access_key = std::move(p.access_key);
  ctx.amz_date = std::move(p.amz_date);
  ctx.scope = std::move(scope);
  ctx.signing_key = std::move(key);
  ctx.seed_signature = std::move(expected);
  ctx.signed_headers = std::move(p.signed_headers);
  ctx.presigned = presigned;
  ctx.payload_hash = std::move(payload_hash);
  return ctx;
}

Result<AuthContext> verify_header(const RequestView& req, std::string_view authorization,
                                  const SecretLookup& secrets, std::string_view region,
                                  system_clock::time_point now, SigningKeyCache* keys) {
  Parsed p;
  OBJDIRECT_RETURN_IF_ERROR(parse_authorization(authorization, region, p));
  if (const std::string* d = find_header(req, "x-amz-date")) {
    OBJDIRECT_RETURN_IF_ERROR(parse_amz_date_into(*d, p));
  } else if (const std::string* hd = find_header(req, "date")) {
    // AWS documents the ISO 8601 basic form (20130524T000000Z) for Date as for x-amz-date, and
    // signs that literal value; an RFC 9110 HTTP date is accepted as well and signed in the
    // basic form.
    if (parse_amz_date(*hd)) {
      OBJDIRECT_RETURN_IF_ERROR(parse_amz_date_into(*hd, p));
    } else {
      auto t = parse_http_date(*hd);
      if (!t) {
        return malformed("Date header is neither YYYYMMDDTHHMMSSZ nor a valid HTTP date");
      }
      p.date = *t;
      p.amz_date = amz_date(*t);
    }
  } else {
    return Status(Errc::access_denied,
                  "AWS authentication requires a valid Date or x-amz-date header");
  }
  const std::string* payload = find_header(req, "x-amz-content-sha256");
  if (payload == nullptr) {
    return Status(Errc::invalid_argument,
                  "Missing required header for this request: x-amz-content-sha256");
  }
  if (!valid_payload_hash(*payload)) {
    return Status(
        Errc::invalid_argument,
        "x-amz-content-sha256 must be UNSIGNED-PAYLOAD, STREAMING-AWS4-HMAC-SHA256-PAYLOAD"
        "[-TRAILER], STREAMING-UNSIGNED-PAYLOAD-TRAILER or a SHA-256 in hex");
  }
  auto skew = std::chrono::abs(std::chrono::duration_cast<seconds>(now - p.date));
  if (skew.count() > limits::clock_skew_max_s) {
    return Status(Errc::request_time_too_skewed,
                  "The difference between the request time and the server's time is too large.");
  }
  return finish(req, secrets, p, *payload, *payload, false, keys);
}

Result<AuthContext> verify_presigned(const RequestView& req, const QueryPairs& query,
                                     const SecretLookup& secrets, std::string_view region,
                                     system_clock::time_point now, SigningKeyCache* keys) {
  const std::string* algo = nullptr;
  const std::string* cred = nullptr;
  const std::string* date = nullptr;
  const std::string* expires = nullptr;
  const std::string* signed_headers = nullptr;
  const std::string* signature = nullptr;
  for (const auto& [k, v] : query) {
    const std::string** slot = nullptr;
    if (k == "X-Amz-Algorithm") slot = &algo;
    if (k == "X-Amz-Credential") slot = &cred;
    if (k == "X-Amz-Date") slot = &date;
    if (k == "X-Amz-Expires") slot = &expires;
    if (k == "X-Amz-SignedHeaders") slot = &signed_headers;
    if (k == "X-Amz-Signature") slot = &signature;
    if (slot == nullptr) continue;
    if (*slot != nullptr) return malformed("Repeated query parameter " + k);
    *slot = &v;
  }
  if (!algo || !cred || !date || !expires || !signed_headers || !signature) {
    return malformed(
        "Query-string authentication requires X-Amz-Algorithm, X-Amz-Credential, X-Amz-Date, "
        "X-Amz-Expires, X-Amz-SignedHeaders and X-Amz-Signature");
  }
  if (*algo != kAlgorithm) return malformed("X-Amz-Algorithm only supports AWS4-HMAC-SHA256");
  Parsed p;
  OBJDIRECT_RETURN_IF_ERROR(parse_credential(*cred, region, p));
  OBJDIRECT_RETURN_IF_ERROR(parse_signed_headers(*signed_headers, p));
  OBJDIRECT_RETURN_IF_ERROR(parse_signature(*signature, p));
  OBJDIRECT_RETURN_IF_ERROR(parse_amz_date_into(*date, p));
  std::int64_t expires_s = 0;
  if (expires->empty() || expires->size() > 7 ||
      !std::all_of(expires->begin(), expires->end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return malformed("X-Amz-Expires must be a number of seconds");
  }
  expires_s = std::stoll(*expires);
  if (expires_s < 1 || expires_s > limits::presign_expires_max_s) {
    return malformed("X-Amz-Expires must be between 1 and 604800 seconds");
  }
  if (now > p.date + seconds{expires_s}) return Status(Errc::access_denied, "Request has expired");
  if (p.date - now > seconds{limits::clock_skew_max_s}) {
    return Status(Errc::access_denied, "Request is not yet valid");
  }
  // A presigner cannot know the body: the canonical payload is UNSIGNED-PAYLOAD unless the URL
  // itself carries X-Amz-Content-Sha256. An x-amz-content-sha256 header the client adds later is
  // not covered by the signature, but is passed on for the handlers to check the body against.
  std::string canonical_payload(kUnsignedPayload);
  for (const auto& [k, v] : query) {
    if (k == "X-Amz-Content-Sha256") canonical_payload = v;
  }
  const std::string* header = find_header(req, "x-amz-content-sha256");
  std::string payload_hash = header ? *header : canonical_payload;
  if (!valid_payload_hash(payload_hash) || !valid_payload_hash(canonical_payload)) {
    return Status(Errc::invalid_argument, "x-amz-content-sha256 has an invalid value");
  }
  return finish(req, secrets, p, canonical_payload, std::move(payload_hash), true, keys);
}

}  // namespace

Result<AuthContext> verify(const RequestView& req, const SecretLookup& secrets,
                           std::string_view region, system_clock::time_point now,
                           SigningKeyCache* keys) {
  const std::string* authorization = find_header(req, "authorization");
  auto [path, raw_query] = split_target(req.target);
  (void)path;
  auto query = try_parse_query(raw_query);
  bool presigned = false;
  if (query) {
    presigned = std::any_of(query->begin(), query->end(),
                            [](const auto& kv) { return kv.first == "X-Amz-Algorithm"; });
  } else if (raw_query.find("X-Amz-Algorithm") != std::string_view::npos) {
    return malformed("Malformed percent-encoding in the query string");
  }
  bool presigned_v2 = !presigned && query &&
                      std::any_of(query->begin(), query->end(),
                                  [](const auto& kv) { return kv.first == "AWSAccessKeyId"; }) &&
                      std::any_of(query->begin(), query->end(),
                                  [](const auto& kv) { return kv.first == "Signature"; });
  if (authorization != nullptr && (presigned || presigned_v2)) {
    return Status(Errc::invalid_argument, "Only one auth mechanism allowed");
  }
  if (authorization != nullptr) {
    if (trim(*authorization).starts_with("AWS ")) {
      return sigv2::verify_header(req, *authorization, secrets, now);
    }
    return verify_header(req, *authorization, secrets, region, now, keys);
  }
  if (presigned) {
    // AWS answers every malformed query-string parameter AuthorizationQueryParametersError.
    auto r = verify_presigned(req, *query, secrets, region, now, keys);
    if (r.code() == Errc::authorization_header_malformed) {
      return Status(Errc::authorization_query_parameters_error, r.status().message());
    }
    return r;
  }
  if (presigned_v2) return sigv2::verify_query(req, secrets, now);
  return Status(Errc::access_denied, "Anonymous access is forbidden");
}

std::string canonical_request(const RequestView& req,
                              const std::vector<std::string>& signed_headers,
                              std::string_view payload_hash, bool presigned_query) {
  auto [path, raw_query] = split_target(req.target);
  std::string out;
  out.reserve(256 + req.target.size());
  out += req.method;
  out.push_back('\n');
  out += canonical_uri(path);
  out.push_back('\n');
  out += canonical_query(raw_query, presigned_query);
  out.push_back('\n');
  for (const auto& name : signed_headers) {
    out += name;
    out.push_back(':');
    bool first = true;
    for (const auto& [k, v] : req.headers) {
      if (!name_equals(k, name)) continue;
      if (!first) out.push_back(',');
      first = false;
      append_trimall(out, v);
    }
    out.push_back('\n');
  }
  out.push_back('\n');
  for (std::size_t i = 0; i < signed_headers.size(); ++i) {
    if (i) out.push_back(';');
    out += signed_headers[i];
  }
  out.push_back('\n');
  out += payload_hash;
  return out;
}

std::string string_to_sign(std::string_view amz_date, std::string_view scope,
                           std::string_view canonical_request) {
  std::string out(kAlgorithm);
  out.push_back('\n');
  out += amz_date;
  out.push_back('\n');
  out += scope;
  out.push_back('\n');
  out += sha256_hex(canonical_request);
  return out;
}

std::string signing_key(std::string_view secret, std::string_view yyyymmdd, std::string_view region,
                        std::string_view service) {
  std::string k = "AWS4";
  k += secret;
  std::string date_key = hmac_sha256(k, yyyymmdd);
  std::string region_key = hmac_sha256(date_key, region);
  std::string service_key = hmac_sha256(region_key, service);
  return hmac_sha256(service_key, kTerminator);
}

SigningKeyCache::SigningKeyCache(std::size_t entries_max)
    : entries_max_(std::clamp<std::size_t>(entries_max, 1, limits::sigv4_signing_keys_max)) {}

std::string SigningKeyCache::get(std::string_view secret, std::string_view yyyymmdd,
                                 std::string_view region, std::string_view service) {
  {
    std::lock_guard lk(mu_);
    for (auto& e : entries_) {
      if (e.date == yyyymmdd && e.region == region && e.service == service && e.secret == secret) {
        e.used = ++clock_;
        return e.key;
      }
    }
  }
  // Derived outside the lock: a miss does not hold up the threads that hit.
  std::string key = signing_key(secret, yyyymmdd, region, service);
  std::lock_guard lk(mu_);
  ++derivations_;
  for (auto& e : entries_) {
    if (e.date == yyyymmdd && e.region == region && e.service == service && e.secret == secret) {
      e.used = ++clock_;
      return key;  // another thread derived it meanwhile
    }
  }
  if (entries_.size() >= entries_max_) {
    auto lru = std::min_element(entries_.begin(), entries_.end(),
                                [](const Entry& a, const Entry& b) { return a.used < b.used; });
    entries_.erase(lru);
  }
  entries_.push_back(Entry{std::string(secret), std::string(yyyymmdd), std::string(region),
                           std::string(service), key, ++clock_});
  return key;
}

std::uint64_t SigningKeyCache::derivations() const {
  std::lock_guard lk(mu_);
  return derivations_;
}

std::size_t SigningKeyCache::size() const {
  std::lock_guard lk(mu_);
  return entries_.size();
}

std::string signature_hex(std::string_view signing_key, std::string_view string_to_sign) {
  return hex_encode(hmac_sha256(signing_key, string_to_sign));
}

std::string credential_scope(std::string_view yyyymmdd, std::string_view region,
                             std::string_view service) {
  std::string out(yyyymmdd);
  out.push_back('/');
  out += region;
  out.push_back('/');
  out += service;
  out.push_back('/');
  out += kTerminator;
  return out;
}

std::string sign(const RequestView& req, const Credentials& c, std::string_view region,
                 std::string_view service, system_clock::time_point now, SigningKeyCache* keys) {
  std::vector<std::string> names;
  for (const auto& [k, v] : req.headers) {
    std::string lower = to_lower(k);
    if (std::find(names.begin(), names.end(), lower) == names.end()) names.push_back(lower);
  }
  std::sort(names.begin(), names.end());
  const std::string* d = find_header(req, "x-amz-date");
  std::string date = d ? *d : amz_date(now);
  const std::string* payload = find_header(req, "x-amz-content-sha256");
  std::string_view payload_hash = payload ? std::string_view(*payload) : kUnsignedPayload;
  std::string ymd = date.substr(0, 8);
  std::string scope = credential_scope(ymd, region, service);
  std::string canonical = canonical_request(req, names, payload_hash, false);
  std::string sig = signature_hex(keys ? keys->get(c.secret_key, ymd, region, service)
                                       : signing_key(c.secret_key, ymd, region, service),
                                  string_to_sign(date, scope, canonical));
  // The canonical request holds every signed header value, an SSE-C key's among them.
  OPENSSL_cleanse(canonical.data(), canonical.size());
  std::string out(kAlgorithm);
  out += " Credential=" + c.access_key + "/" + scope + ", SignedHeaders=";
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i) out.push_back(';');
    out += names[i];
  }
  out += ", Signature=" + sig;
  return out;
}

std::string presign(std::string_view method, std::string_view target, std::string_view host,
                    const Credentials& c, std::string_view region, std::chrono::seconds expires,
                    system_clock::time_point now, SigningKeyCache* keys) {
  auto [path, existing] = split_target(target);
  std::int64_t expires_s =
      std::clamp<std::int64_t>(expires.count(), 1, limits::presign_expires_max_s);
  std::string date = amz_date(now);
  std::string ymd = date.substr(0, 8);
  std::string scope = credential_scope(ymd, region, kService);
  std::string query(existing);
  if (!query.empty()) query.push_back('&');
  query += "X-Amz-Algorithm=";
  query += kAlgorithm;
  query += "&X-Amz-Credential=" + uri_encode(c.access_key + "/" + scope, true);
  query += "&X-Amz-Date=" + date;
  query += "&X-Amz-Expires=" + std::to_string(expires_s);
  query += "&X-Amz-SignedHeaders=host";
  std::string full(path.empty() ? "/" : path);
  full.push_back('?');
  full += query;
  RequestView rv{method, full, {{"host", std::string(host)}}};
  std::string canonical_payload(kUnsignedPayload);
  for (const auto& [k, v] : parse_query(existing)) {
    if (k == "X-Amz-Content-Sha256") canonical_payload = v;  // as verify() reads it
  }
  std::string canonical = canonical_request(rv, {"host"}, canonical_payload, true);
  std::string sig = signature_hex(keys ? keys->get(c.secret_key, ymd, region, kService)
                                       : signing_key(c.secret_key, ymd, region, kService),
                                  string_to_sign(date, scope, canonical));
  full += "&X-Amz-Signature=" + sig;
  return full;
}

std::string chunk_string_to_sign(std::string_view amz_date, std::string_view scope,
                                 std::string_view prev_signature,
                                 std::string_view chunk_sha256_hex) {
  std::string out = "AWS4-HMAC-SHA256-PAYLOAD\n";
  out += amz_date;
  out.push_back('\n');
  out += scope;
  out.push_back('\n');
  out += prev_signature;
  out.push_back('\n');
  out += kEmptySha256;
  out.push_back('\n');
  out += chunk_sha256_hex;
  return out;
}

std::string trailer_string_to_sign(std::string_view amz_date, std::string_view scope,
                                   std::string_view prev_signature,
                                   std::string_view trailer_sha256_hex) {
  std::string out = "AWS4-HMAC-SHA256-TRAILER\n";
  out += amz_date;
  out.push_back('\n');
  out += scope;
  out.push_back('\n');
  out += prev_signature;
  out.push_back('\n');
  out += trailer_sha256_hex;
  return out;
}

}  // namespace objdirect::sigv4
