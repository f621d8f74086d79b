#include "client/planner.hpp"

#include <algorithm>
#include <charconv>

#include "common/assert.hpp"
#include "common/limits.hpp"

namespace objdirect {

std::vector<Piece> split_range(std::uint64_t offset, std::uint64_t length, std::uint64_t part_size,
                               std::uint64_t buffer_offset0) {
  std::vector<Piece> pieces;
  if (length == 0 || part_size == 0) return pieces;
  pieces.reserve(static_cast<std::size_t>((length + part_size - 1) / part_size));
  for (std::uint64_t done = 0; done < length;) {
    std::uint64_t n = std::min(part_size, length - done);
    pieces.push_back(Piece{offset + done, n, buffer_offset0 + done, 0});
    done += n;
  }
  return pieces;
}

Result<UploadPlan> plan_upload(std::uint64_t size, std::uint64_t part_size,
                               std::uint64_t threshold) {
  if (part_size == 0) return Status(Errc::invalid_argument, "part size must be > 0");
  if (size > limits::object_bytes_max) {
    return Status(Errc::entity_too_large,
                  "object of " + std::to_string(size) + " bytes exceeds the S3 maximum of 5 TiB");
  }
  UploadPlan plan;
  const bool single = threshold == 0 ? size <= part_size : size < threshold;
  if (single && size <= limits::put_bytes_max) {
    plan.part_size = part_size;
    plan.parts.push_back(Piece{0, size, 0, 0});
    return plan;
  }
  plan.multipart = true;
  std::uint64_t ps = std::max<std::uint64_t>(part_size, limits::part_bytes_min);
  // Enough bytes per part that the count stays within parts_max.
  std::uint64_t floor = (size + limits::parts_max - 1) / limits::parts_max;
  ps = std::max(ps, floor);
  ps = std::min<std::uint64_t>(ps, limits::part_bytes_max);
  plan.part_size = ps;
  plan.parts = split_range(0, size, ps);
  for (std::size_t i = 0; i < plan.parts.size(); ++i) {
    plan.parts[i].part_number = static_cast<std::uint32_t>(i + 1);
  }
  // The parts tile [0, size) in order, each within S3's part bounds (all but the last at least
  // part_bytes_min), and there are at most parts_max of them (limits.hpp's static_asserts make
  // that reachable for every size up to object_bytes_max).
  OBJDIRECT_ASSERT(!plan.parts.empty() && plan.parts.size() <= limits::parts_max,
                   "a multipart plan has 1..parts_max parts");
  std::uint64_t next = 0;
  for (std::size_t i = 0; i < plan.parts.size(); ++i) {
    const Piece& p = plan.parts[i];
    OBJDIRECT_ASSERT(p.offset == next && p.buffer_offset == next, "parts tile the object in order");
    OBJDIRECT_ASSERT(p.length > 0 && p.length <= limits::part_bytes_max,
                     "a part is 1..part_bytes_max bytes");
    OBJDIRECT_ASSERT(i + 1 == plan.parts.size() || p.length >= limits::part_bytes_min,
                     "all but the last part are at least part_bytes_min");
    next += p.length;
  }
  OBJDIRECT_ASSERT(next == size, "the parts cover the whole object");
  return plan;
}

}  // namespace objdirect

namespace objdirect::client {

std::string range_header(std::uint64_t offset, std::uint64_t length) {
  return "bytes=" + std::to_string(offset) + "-" + std::to_string(offset + length - 1);
}

namespace {
bool parse_u64(std::string_view s, std::uint64_t& out) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}
}  // namespace

std::optional<ContentRange> parse_content_range(std::string_view v) {
  if (!v.starts_with("bytes ")) return std::nullopt;
  v.remove_prefix(6);
  auto dash = v.find('-');
  auto slash = v.find('/');
  if (dash == std::string_view::npos || slash == std::string_view::npos || dash > slash) {
    return std::nullopt;
  }
  ContentRange cr;
  if (!parse_u64(v.substr(0, dash), cr.first) ||
      !parse_u64(v.substr(dash + 1, slash - dash - 1), cr.last) ||
      !parse_u64(v.substr(slash + 1), cr.total)) {
    return std::nullopt;
  }
  if (cr.last < cr.first || cr.last >= cr.total) return std::nullopt;
  return cr;
}

}  // namespace objdirect::client
