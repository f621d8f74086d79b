// Transfer planning: how a get or put of N bytes is cut into HTTP requests, as Client::get and
// Client::put cut them. Public so that a program driving the explicit calls (ranged
// Client::get, Client::upload_part) cuts an object exactly as the library would, for instance to
// predict the multipart ETag ("...-N") that Client::put of a local file will produce.
//
// Downloads are cut into Range GETs of part_size bytes (the last one shorter). Uploads up to
// part_size are one PutObject; larger ones are a multipart upload whose part size is raised to at
// least 5 MiB (S3's floor for all but the last part), to whatever keeps the part count within
// S3's 10,000 parts and lowered to at most S3's 5 GiB per part (docs/limits.md).
//
// Thread safety: pure functions of their arguments; call them from any thread.
#pragma once

#include <cstdint>
#include <vector>

#include "objdirect/export.hpp"
#include "objdirect/status.hpp"

namespace objdirect {

// [offset, offset+length) of an object, and where it lands in the caller's buffer.
struct Piece {
  std::uint64_t offset = 0;         // in the object
  std::uint64_t length = 0;         // bytes
  std::uint64_t buffer_offset = 0;  // in the caller's buffer
  std::uint32_t part_number = 0;    // 1-based for multipart uploads; 0 otherwise
};

// Cuts [offset, offset+length) into consecutive pieces of part_size bytes, the last one shorter;
// buffer_offset counts from `buffer_offset0`. length 0 or part_size 0 gives no pieces.
OBJDIRECT_API std::vector<Piece> split_range(std::uint64_t offset, std::uint64_t length,
                                             std::uint64_t part_size,
                                             std::uint64_t buffer_offset0 = 0);

struct UploadPlan {
  bool multipart = false;
  std::uint64_t part_size = 0;  // the part size actually used
  std::vector<Piece> parts;     // single PUT: one piece (of length 0 for an empty object)
};

// Single PUT when size <= part_size, or, with a threshold, when size < threshold (and always
// size <= 5 GiB, S3's largest PutObject); otherwise a multipart plan with part_number 1..N, the
// parts tiling [0, size) in order. Client::put plans with (ClientConfig::part_size_bytes,
// ClientConfig::multipart_threshold_bytes).
// Errors: invalid_argument (part_size 0), entity_too_large (size > 5 TiB, S3's largest object).
OBJDIRECT_API Result<UploadPlan> plan_upload(std::uint64_t size, std::uint64_t part_size,
                                             std::uint64_t threshold = 0);

}  // namespace objdirect
