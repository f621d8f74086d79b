// Transfer planning: how a get or put of N bytes is cut into HTTP requests.
//
// Downloads are cut into Range GETs of part_size bytes (the last one shorter). Uploads up to
// part_size are one PutObject; larger ones are a multipart upload whose part size is raised to at
// least limits::part_bytes_min (S3's 5 MiB floor for all but the last part) and to whatever keeps
// the part count within limits::parts_max.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.hpp"

namespace objdirect::client {

// [offset, offset+length) of an object, and where it lands in the caller's buffer.
struct Piece {
  std::uint64_t offset = 0;         // in the object
  std::uint64_t length = 0;         // bytes
  std::uint64_t buffer_offset = 0;  // in the caller's buffer
  std::uint32_t part_number = 0;    // 1-based for multipart uploads; 0 otherwise
};

// Cuts [offset, offset+length) into consecutive pieces of part_size bytes, the last one shorter;
// buffer_offset counts from `buffer_offset0`. length 0 gives no pieces. Precondition:
// part_size > 0.
std::vector<Piece> split_range(std::uint64_t offset, std::uint64_t length, std::uint64_t part_size,
                               std::uint64_t buffer_offset0 = 0);

struct UploadPlan {
  bool multipart = false;
  std::uint64_t part_size = 0;  // the part size actually used
  std::vector<Piece> parts;     // single PUT: one piece (of length 0 for an empty object)
};

// Single PUT when size <= part_size, or with a threshold when size < threshold (and always
// size <= limits::put_bytes_max); otherwise a multipart plan with part_number 1..N.
// Errors: invalid_argument (part_size 0), entity_too_large (size > limits::object_bytes_max).
Result<UploadPlan> plan_upload(std::uint64_t size, std::uint64_t part_size,
                               std::uint64_t threshold = 0);

// "bytes=FIRST-LAST" for a piece of length > 0.
std::string range_header(std::uint64_t offset, std::uint64_t length);

struct ContentRange {
  std::uint64_t first = 0;
  std::uint64_t last = 0;   // inclusive
  std::uint64_t total = 0;  // complete length
};
// Parses "bytes FIRST-LAST/TOTAL" (a Content-Range of a 206). nullopt for anything else,
// including "*" totals and last < first or last >= total.
std::optional<ContentRange> parse_content_range(std::string_view value);

}  // namespace objdirect::client
