#include "s3/range.hpp"

#include <boost/beast/core/string.hpp>
#include <limits>

namespace objdirect::s3 {
namespace {

constexpr std::uint64_t kSaturated = std::numeric_limits<std::uint64_t>::max();

bool is_ows(char c) {
  return c == ' ' || c == '\t';
}
bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

std::string_view trim_ows(std::string_view s) {
  while (!s.empty() && is_ows(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_ows(s.back())) s.remove_suffix(1);
  return s;
}

// A non-empty run of ASCII digits, saturating at 2^64-1 rather than failing: an enormous number
// is still a syntactically valid position (RFC 9110 puts no bound on it).
std::optional<std::uint64_t> parse_digits(std::string_view s) {
  if (s.empty()) return std::nullopt;
  std::uint64_t v = 0;
  for (char c : s) {
    if (!is_digit(c)) return std::nullopt;
    const std::uint64_t d = static_cast<std::uint64_t>(c - '0');
    if (v > (kSaturated - d) / 10) {
      v = kSaturated;
    } else {
      v = v * 10 + d;
    }
  }
  return v;
}

}  // namespace

Result<std::optional<ByteRange>> parse_range(std::string_view header, std::uint64_t size) {
  const std::optional<ByteRange> ignore;
  std::string_view v = trim_ows(header);
  const std::size_t eq = v.find('=');
  if (eq == std::string_view::npos) return ignore;
  if (!boost::beast::iequals(trim_ows(v.substr(0, eq)), "bytes")) return ignore;
  std::string_view spec = trim_ows(v.substr(eq + 1));
  // Several ranges: S3 does not serve multipart/byteranges and ignores the header.
  if (spec.find(',') != std::string_view::npos) return ignore;
  const std::size_t dash = spec.find('-');
  if (dash == std::string_view::npos) return ignore;
  const std::string_view first_s = spec.substr(0, dash);
  const std::string_view last_s = spec.substr(dash + 1);

  if (first_s.empty()) {
    // Suffix range "bytes=-n": the last n bytes.
    const std::optional<std::uint64_t> n = parse_digits(last_s);
    if (!n) return ignore;
    if (*n == 0 || size == 0) {
      return Status(Errc::invalid_range, "The requested range is not satisfiable");
    }
    const std::uint64_t len = *n < size ? *n : size;
    return std::optional<ByteRange>(ByteRange{size - len, size - 1});
  }

  const std::optional<std::uint64_t> first = parse_digits(first_s);
  if (!first) return ignore;
  std::uint64_t last = kSaturated;
  if (!last_s.empty()) {
    const std::optional<std::uint64_t> l = parse_digits(last_s);
    if (!l) return ignore;
    last = *l;
    if (last < *first) return ignore;  // RFC 9110: syntactically invalid, so ignored
  }
  if (*first >= size) {
    return Status(Errc::invalid_range, "The requested range is not satisfiable");
  }
  if (last > size - 1) last = size - 1;
  return std::optional<ByteRange>(ByteRange{*first, last});
}

Result<ByteRange> parse_copy_source_range(std::string_view header, std::uint64_t source_size) {
  const Status malformed(Errc::invalid_argument,
                         "The x-amz-copy-source-range value must be of the form bytes=first-last "
                         "where first and last are the zero-based offsets of the first and last "
                         "bytes to copy");
  std::string_view v = trim_ows(header);
  if (!v.starts_with("bytes=")) return malformed;
  v.remove_prefix(6);
  const std::size_t dash = v.find('-');
  if (dash == std::string_view::npos) return malformed;
  const std::optional<std::uint64_t> first = parse_digits(v.substr(0, dash));
  const std::optional<std::uint64_t> last = parse_digits(v.substr(dash + 1));
  if (!first || !last || *last < *first) return malformed;
  if (*last >= source_size) {
    return Status(Errc::invalid_request,
                  "The specified copy range is invalid for the source object size");
  }
  return ByteRange{*first, *last};
}

std::string content_range(const ByteRange& range, std::uint64_t size) {
  return "bytes " + std::to_string(range.first) + "-" + std::to_string(range.last) + "/" +
         std::to_string(size);
}

std::string content_range_unsatisfied(std::uint64_t size) {
  return "bytes */" + std::to_string(size);
}

}  // namespace objdirect::s3
