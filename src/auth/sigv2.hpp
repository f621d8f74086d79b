// AWS Signature Version 2 for S3 (HMAC-SHA1), verification only, for compatibility: boto3's
// generate_presigned_url() still produces SigV2 query URLs (AWSAccessKeyId/Signature/Expires)
// unless the client is configured with signature_version="s3v4", and some older tools sign
// headers with "Authorization: AWS <key>:<signature>".
//
// sigv4::verify() dispatches here; callers normally do not call this file directly.
//
// StringToSign = Method \n Content-MD5 \n Content-Type \n Date-or-Expires \n
//                CanonicalizedAmzHeaders CanonicalizedResource
//  - Date is empty when x-amz-date is present (header auth); Expires for query auth.
//  - CanonicalizedAmzHeaders: every x-amz-* header (and, for query auth, x-amz-* query parameter),
//    lower-case, sorted, repeated values trimmed and joined with ',', as "name:value\n".
//  - CanonicalizedResource: "/bucket" + the raw (still percent-encoded) path for virtual-hosted
//    requests, or the raw path for path-style; then the S3 sub-resources and response-* overrides
//    of the query, sorted by name, values percent-decoded. verify() does not know the server's
//    domain, so it tries the path as-is and then each dot-separated prefix of the Host as bucket.
//
// Thread safety: all functions are thread-safe.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "auth/sigv4.hpp"

namespace objdirect::sigv2 {

// Header auth; `authorization` is the full header value ("AWS AKID:base64sig").
// Errors: authorization_header_malformed (unparsable), access_denied (no Date / x-amz-date),
// invalid_access_key_id, request_time_too_skewed (|now - date| > limits::clock_skew_max_s),
// signature_does_not_match.
Result<sigv4::AuthContext> verify_header(const sigv4::RequestView& req,
                                         std::string_view authorization,
                                         const sigv4::SecretLookup& secrets,
                                         std::chrono::system_clock::time_point now);

// Query auth (AWSAccessKeyId, Signature, Expires).
// Errors: authorization_header_malformed (missing/unparsable parameters, Expires more than
// limits::presign_expires_max_s ahead), access_denied "Request has expired", invalid_access_key_id,
// signature_does_not_match.
Result<sigv4::AuthContext> verify_query(const sigv4::RequestView& req,
                                        const sigv4::SecretLookup& secrets,
                                        std::chrono::system_clock::time_point now);

// The string to sign for `req` with the given canonical resource; `date_or_expires` is the Date
// header value (header auth) or the Expires parameter (query auth).
std::string string_to_sign(const sigv4::RequestView& req, std::string_view date_or_expires,
                           std::string_view canonical_resource, bool query_auth);

// CanonicalizedResource for a raw request-target and an optional virtual-hosted bucket.
std::string canonical_resource(std::string_view target, std::string_view bucket);

// base64(HMAC-SHA1(secret, string_to_sign)).
std::string signature(std::string_view secret, std::string_view string_to_sign);

}  // namespace objdirect::sigv2
