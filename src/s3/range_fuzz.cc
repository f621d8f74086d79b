// libFuzzer target for parse_range/parse_copy_source_range/content_range (built with
// -DOBJDIRECT_FUZZ=ON; see CMakeLists.txt). range_fuzz_one is also replayed by range_test.cc so the
// ordinary build checks it. Input: 8 bytes of object size (little-endian; sizes are folded to a few
// interesting classes), then the header value. Every invariant failure aborts.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "s3/range.hpp"

namespace objdirect::s3 {

bool range_fuzz_one(const std::uint8_t* data, std::size_t size) {
  std::uint64_t object_size = 0;
  if (size >= 8) {
    std::memcpy(&object_size, data, 8);
    data += 8;
    size -= 8;
  }
  // Mostly small sizes, so that random headers hit both satisfiable and unsatisfiable ranges.
  switch (object_size >> 62) {
    case 0:
      object_size &= 0xFFF;
      break;
    case 1:
      object_size &= 0xFFFFFFFFFF;
      break;
    default:
      break;
  }
  const std::string_view header(reinterpret_cast<const char*>(data), size);
  auto copy = parse_copy_source_range(header, object_size);
  if (copy.ok()) {
    if (copy->first > copy->last || copy->last >= object_size) return false;
    // The strict form is a subset of the Range grammar and must agree with it.
    auto same = parse_range(header, object_size);
    if (!same.ok() || !same->has_value() || **same != *copy) return false;
  } else if ((copy.code() != Errc::invalid_argument && copy.code() != Errc::invalid_request) ||
             copy.status().message().empty()) {
    return false;
  }
  auto r = parse_range(header, object_size);
  if (!r.ok()) {
    // Unsatisfiable is the only error, and it always says why.
    return r.code() == Errc::invalid_range && !r.status().message().empty();
  }
  if (!r->has_value()) return true;
  const ByteRange b = **r;
  if (object_size == 0 || b.first > b.last || b.last >= object_size) return false;
  if (b.length() == 0 || b.length() > object_size) return false;
  const std::string cr = content_range(b, object_size);
  const std::string want = "bytes " + std::to_string(b.first) + "-" + std::to_string(b.last) + "/" +
                           std::to_string(object_size);
  if (cr != want) return false;
  // A satisfiable header parses again to the same range: the parser is a pure function.
  auto again = parse_range(header, object_size);
  return again.ok() && again->has_value() && **again == b;
}

}  // namespace objdirect::s3

#ifdef OBJDIRECT_FUZZ_MAIN
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (!objdirect::s3::range_fuzz_one(data, size)) std::abort();
  return 0;
}
#endif
