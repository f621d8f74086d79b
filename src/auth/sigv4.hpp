// AWS Signature Version 4 for S3: verification on the server, signing and presigning on the client,
// and the string-to-sign pieces of aws-chunked uploads.
//
// The request is described by RequestView, which is independent of any HTTP library: the method,
// the raw request-target exactly as it arrived on the wire, and the headers with lower-case names.
//
// Canonicalisation follows S3 (not the generic AWS services):
//  - canonical URI: the raw path is percent-decoded once and each byte re-encoded with
//    uri_encode(encode_slash=false). S3 neither double-encodes nor normalises ("." / ".." / "//"
//    segments are kept). An empty path is "/".
//  - canonical query: pairs decoded, then names and values uri_encode'd (slash encoded) and sorted
//    by name, then value; a bare name ("uploads") becomes "uploads=". Presigned requests leave
//    X-Amz-Signature out.
//  - canonical headers: in the order of SignedHeaders; values trimmed, inner runs of spaces and
//    tabs collapsed to one space, repeated headers joined with ','.
//
// Thread safety: all functions are thread-safe; verify() calls `secrets` on the calling thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/limits.hpp"
#include "common/status.hpp"

namespace objdirect::limits {
inline constexpr std::size_t signed_headers_max = 64;  // names in one SignedHeaders list
// Signing keys one SigningKeyCache holds: one per (secret, date, region, service) in use. A
// client signs with one secret and region, so it needs one for today (and yesterday's, around
// midnight UTC); past the bound the least recently used key is dropped.
inline constexpr std::size_t sigv4_signing_keys_max = 8;
}  // namespace objdirect::limits

namespace objdirect::sigv4 {

inline constexpr std::string_view kAlgorithm = "AWS4-HMAC-SHA256";
inline constexpr std::string_view kUnsignedPayload = "UNSIGNED-PAYLOAD";
inline constexpr std::string_view kStreamingSigned = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD";
inline constexpr std::string_view kStreamingSignedTrailer =
    "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER";
inline constexpr std::string_view kStreamingUnsignedTrailer = "STREAMING-UNSIGNED-PAYLOAD-TRAILER";
// Hex SHA-256 of the empty string: the payload hash of a request without a body.
inline constexpr std::string_view kEmptySha256 =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

struct Credentials {
  std::string access_key, secret_key;
};

struct RequestView {
  std::string_view method;  // "GET"
  std::string_view target;  // raw request-target as on the wire: "/bucket/a%20b?uploads"
  // Lower-case names, values as received; repeats allowed.
  std::vector<std::pair<std::string, std::string>> headers;
};

// What a verified request carries on to the handlers.
struct AuthContext {
  std::string access_key;
  std::string amz_date;                     // "20130524T000000Z"
  std::string scope;                        // "20130524/us-east-1/s3/aws4_request"
  std::string signing_key;                  // raw 32 bytes, for chunk signatures
  std::string seed_signature;               // hex, the request signature (seed for aws-chunked)
  std::vector<std::string> signed_headers;  // lower-case, as listed by the client
  bool presigned = false;
  // x-amz-content-sha256 value. Presigned requests without that header: the URL's
  // X-Amz-Content-Sha256, else "UNSIGNED-PAYLOAD" (the value their signature covers).
  std::string payload_hash;
  bool anonymous = false;  // never set by verify(); for callers that admit anonymous requests
  // Verified with SigV2 (HMAC-SHA1, see sigv2.hpp): signing_key, seed_signature and scope are
  // empty, amz_date is the request (or expiry) time, signed_headers lists the x-amz-*,
  // content-md5, content-type and date headers the signature covers.
  bool sigv2 = false;
};

// Returns the secret key of an access key, or nullopt if the key is unknown.
using SecretLookup = std::function<std::optional<std::string>(std::string_view access_key)>;

// Verifies header auth ("Authorization: AWS4-HMAC-SHA256 Credential=...") or presigned-query auth
// (X-Amz-Algorithm=... in the query). Legacy SigV2 ("Authorization: AWS key:sig", or
// AWSAccessKeyId/Signature/Expires in the query) is handed to sigv2.hpp, which reports the same
// error codes. An empty `region` accepts any region in the scope; otherwise
// the scope's region must equal it. Signatures are compared in constant time. `keys`: where
// the signing key comes from (null: derived for this call); a server passes one cache for all its
// requests, so a client's key is derived once a day, not per request (SigV2 derives none).
// Errors:
//  - access_denied "Anonymous access is forbidden": neither form of credentials present;
//    access_denied also for header auth with neither x-amz-date nor Date.
//  - invalid_argument: both forms at once; header auth without x-amz-content-sha256, or with a
//    value that is neither 64 hex digits nor one of the UNSIGNED/STREAMING markers.
//  - authorization_header_malformed: unparsable Authorization header or X-Amz-* parameters, an
//    algorithm other than AWS4-HMAC-SHA256, a bad credential scope (date != request date, wrong
//    region, service not s3, terminator not aws4_request), SignedHeaders without host, a missing
//    or malformed date, X-Amz-Expires outside 1..604800.
//  - invalid_access_key_id: `secrets` does not know the access key.
//  - request_time_too_skewed: header auth with |now - date| > limits::clock_skew_max_s.
//  - access_denied "Request has expired": presigned, now > X-Amz-Date + X-Amz-Expires;
//    access_denied "Request is not yet valid": presigned, X-Amz-Date more than the skew in the
//    future.
//  - signature_does_not_match: the computed signature differs.
class SigningKeyCache;
Result<AuthContext> verify(const RequestView& req, const SecretLookup& secrets,
                           std::string_view region, std::chrono::system_clock::time_point now,
                           SigningKeyCache* keys = nullptr);

// The canonical request (see the file comment). `signed_headers` are lower-case names in the order
// they are to appear; a signed header absent from `req` contributes an empty value.
std::string canonical_request(const RequestView& req,
                              const std::vector<std::string>& signed_headers,
                              std::string_view payload_hash, bool presigned_query);
// "AWS4-HMAC-SHA256\n<amz_date>\n<scope>\n<hex sha256 of canonical_request>".
std::string string_to_sign(std::string_view amz_date, std::string_view scope,
                           std::string_view canonical_request);
// The raw 32-byte key: HMAC chain over "AWS4"+secret, date, region, service, "aws4_request".
std::string signing_key(std::string_view secret, std::string_view yyyymmdd, std::string_view region,
                        std::string_view service);
// The signing keys of signing_key(), derived once per (secret, yyyymmdd, region, service) and
// reused: the four HMACs of the chain cost more than signing a request's string to sign, and a
// client's key changes once a day. Bounded by `entries_max` (1..limits::sigv4_signing_keys_max):
// a miss past it drops the least recently used key. A new date is a new entry, so the key rolls
// over at midnight UTC on its own. Holds the secrets it was given (as the Credentials that
// supplied them do), and nothing derived from them outlives the cache.
// Thread safety: thread-safe; a miss derives the key outside the lock (two threads that miss at
// once both derive it; one entry is kept).
class SigningKeyCache {
 public:
  explicit SigningKeyCache(std::size_t entries_max = limits::sigv4_signing_keys_max);
  // signing_key(secret, yyyymmdd, region, service), from the cache when it holds it.
  std::string get(std::string_view secret, std::string_view yyyymmdd, std::string_view region,
                  std::string_view service);
  // Keys derived (misses) since construction, and keys held now (tests).
  std::uint64_t derivations() const;
  std::size_t size() const;

 private:
  struct Entry {
    std::string secret, date, region, service;
    std::string key;
    std::uint64_t used = 0;  // the use clock at the last hit
  };
  const std::size_t entries_max_;
  mutable std::mutex mu_;
  std::vector<Entry> entries_;  // at most entries_max_: a linear scan beats hashing the secret
  std::uint64_t clock_ = 0;
  std::uint64_t derivations_ = 0;
};

// Lower-case hex HMAC-SHA256(signing_key, string_to_sign).
std::string signature_hex(std::string_view signing_key, std::string_view string_to_sign);
// "<yyyymmdd>/<region>/<service>/aws4_request".
std::string credential_scope(std::string_view yyyymmdd, std::string_view region,
                             std::string_view service);

// Client side: the Authorization header value for `req`. req.headers must already contain host,
// x-amz-date and x-amz-content-sha256 (the payload hash signed); every header in req.headers is
// signed. If x-amz-date is missing, amz_date(now) is used (and the server will then reject it).
// keys: where the signing key comes from (null: derived for this call).
std::string sign(const RequestView& req, const Credentials& c, std::string_view region,
                 std::string_view service, std::chrono::system_clock::time_point now,
                 SigningKeyCache* keys = nullptr);

// Client side: a presigned path+query ("/bucket/key?X-Amz-Algorithm=...&X-Amz-Signature=...") for
// method/target/host. Any query already in `target` is kept and signed. Only host is signed and the
// payload is UNSIGNED-PAYLOAD, or the X-Amz-Content-Sha256 already in `target`'s query. `expires`
// is clamped to 1..604800 s.
std::string presign(std::string_view method, std::string_view target, std::string_view host,
                    const Credentials& c, std::string_view region, std::chrono::seconds expires,
                    std::chrono::system_clock::time_point now, SigningKeyCache* keys = nullptr);

// aws-chunked: string to sign of one chunk ("AWS4-HMAC-SHA256-PAYLOAD\n...") and of the trailer
// ("AWS4-HMAC-SHA256-TRAILER\n..."). The trailer hash is over the trailer lines as
// "name:value\n" each.
std::string chunk_string_to_sign(std::string_view amz_date, std::string_view scope,
                                 std::string_view prev_signature,
                                 std::string_view chunk_sha256_hex);
std::string trailer_string_to_sign(std::string_view amz_date, std::string_view scope,
                                   std::string_view prev_signature,
                                   std::string_view trailer_sha256_hex);

}  // namespace objdirect::sigv4
