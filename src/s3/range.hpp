// HTTP Range header parsing for GetObject/HeadObject, with S3's semantics.
//
// S3 serves at most one byte range. A header that is not a single syntactically valid byte range
// (several ranges, another unit, garbage, "bytes=5-2") is ignored and the whole object is served
// with 200, as RFC 9110 section 14.2 allows. A single valid range that cannot be satisfied is an
// InvalidRange error (416).
//
// Thread safety: pure functions; safe to call concurrently.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.hpp"

namespace objdirect::s3 {

// An inclusive byte range [first, last] within an object; always first <= last.
struct ByteRange {
  std::uint64_t first = 0, last = 0;
  std::uint64_t length() const { return last - first + 1; }
  bool operator==(const ByteRange&) const = default;
};

// Parses a Range header value against the object size, as S3 does:
//   "bytes=a-b"  -> [a, min(b, size-1)]
//   "bytes=a-"   -> [a, size-1]
//   "bytes=-n"   -> the last min(n, size) bytes
// The unit is case-insensitive; optional whitespace around the value and around the range is
// accepted. Numbers too large for 64 bits saturate (so "bytes=0-99999999999999999999" is the whole
// object and "bytes=99999999999999999999-" is unsatisfiable).
// Returns:
//   nullopt when the header must be ignored (not exactly one syntactically valid byte range:
//     multi-range, other units, missing '=', non-digits, last < first);
//   Errc::invalid_range when the range is unsatisfiable: a >= size, "bytes=-0", or size == 0;
//   otherwise the clamped range.
Result<std::optional<ByteRange>> parse_range(std::string_view header, std::uint64_t size);

// Parses UploadPartCopy's x-amz-copy-source-range, which S3 treats strictly: exactly
// "bytes=first-last" (no suffix or open-ended form, no clamping, no whitespace inside).
// Errc::invalid_argument when malformed (including last < first); Errc::invalid_request when
// last >= source_size ("The specified copy range is invalid for the source object size").
Result<ByteRange> parse_copy_source_range(std::string_view header, std::uint64_t source_size);

// The Content-Range value for a 206 response: "bytes 0-0/1234".
std::string content_range(const ByteRange& range, std::uint64_t size);

// The Content-Range value for a 416 response: "bytes */1234".
std::string content_range_unsatisfied(std::uint64_t size);

}  // namespace objdirect::s3
