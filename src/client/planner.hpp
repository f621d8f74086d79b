// Transfer planning, the library's side: the public plan (objdirect/plan.hpp: how a get or put
// of N bytes is cut into requests) and the Range / Content-Range helpers the HTTP requests of a
// plan need.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.hpp"
#include "objdirect/plan.hpp"

namespace objdirect::client {

// The plan itself is public (objdirect/plan.hpp: Piece, split_range, UploadPlan, plan_upload);
// the library's own code names it here as before.
using objdirect::Piece;
using objdirect::plan_upload;
using objdirect::split_range;
using objdirect::UploadPlan;

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
