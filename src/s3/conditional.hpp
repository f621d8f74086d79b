// Conditional request evaluation (If-Match, If-None-Match, If-Modified-Since,
// If-Unmodified-Since) with S3's semantics.
//
// Reads (GetObject, HeadObject, and CopyObject's x-amz-copy-source-if-* headers) follow RFC 9110
// section 13.2.2 order, which is also what S3 documents:
//   1. If-Match present: no listed ETag matches (strong comparison)    -> 412 precondition_failed
//      else If-Unmodified-Since present and valid: modified after it     -> 412 precondition_failed
//   2. If-None-Match present: some listed ETag matches (weak comparison) -> 304 not_modified
//      else If-Modified-Since present and valid: not modified after it   -> 304 not_modified
// So If-Match that matches makes S3 skip If-Unmodified-Since, and If-None-Match that does not
// match makes it skip If-Modified-Since. A 412 from step 1 wins over everything in step 2.
// The caller evaluates conditions before the Range header (a mismatched If-Match on a ranged GET
// is 412, not 416). For CopyObject the caller maps not_modified to 412, as S3 does.
//
// ETag lists: comma-separated entity-tags, each quoted ("abc"), weak (W/"abc") or, leniently, bare
// (abc) as S3 accepts; "*" matches any existing object. If-Match uses strong comparison, so a weak
// tag (W/"abc") never satisfies it; If-None-Match uses weak comparison, so W/ is ignored there.
// A header whose value is empty or only whitespace counts as absent. Dates are HTTP-dates in any of
// the three forms of common/time.hpp's parse_http_date; unparsable dates are ignored (RFC 9110).
// Times compare at one-second resolution, as Last-Modified is sent: the object's time is mtime_ns
// rounded down to a whole second.
//
// Thread safety: pure functions; safe to call concurrently.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.hpp"

namespace objdirect::s3 {

// Raw header values, exactly as received; nullopt when the header is absent.
struct Conditions {
  std::optional<std::string> if_match, if_none_match, if_modified_since, if_unmodified_since;
};

// Evaluates read conditions against an existing object whose (unquoted) ETag is `etag` and whose
// last modification time is `mtime_ns` (nanoseconds since the Unix epoch).
// Returns ok, Errc::precondition_failed (412) or Errc::not_modified (304), each with a message.
Status evaluate_read(const Conditions& conditions, std::string_view etag, std::int64_t mtime_ns);

// What a conditional write (PutObject, CompleteMultipartUpload) requires of the current object.
struct WriteConditionSpec {
  enum class Kind {
    none,             // unconditional
    must_be_absent,   // If-None-Match: * ; the write fails with 412 if the key exists
    etag_must_match,  // If-Match: <etag> ; the write fails with 412 unless the key exists with it
  } kind = Kind::none;
  std::string etag;  // unquoted; set for etag_must_match
};

// Parses the conditional-write headers as S3 does:
//   If-None-Match must be exactly "*" (whitespace around it allowed); any other value ->
//     Errc::not_implemented (S3 answers 501 NotImplemented for ETag values here).
//   If-Match must be one strong entity-tag, quoted or bare; "*", a list, or a weak tag ->
//     Errc::not_implemented; an empty quoted tag ("") -> Errc::invalid_argument.
//   Both headers together -> Errc::not_implemented.
// Absent or empty headers impose nothing.
Result<WriteConditionSpec> parse_write_conditions(const std::optional<std::string>& if_match,
                                                  const std::optional<std::string>& if_none_match);

// Strips surrounding whitespace, a W/ prefix and one pair of surrounding double quotes:
// W/"abc" -> abc, "abc" -> abc, abc -> abc.
std::string unquote_etag(std::string_view etag);

}  // namespace objdirect::s3
