// libFuzzer target for the Tagging document and the x-amz-tagging header (built with
// -DOBJDIRECT_FUZZ=ON; see CMakeLists.txt). tagging_fuzz_one is also replayed by tagging_test.cc so
// the ordinary build checks it. The input is fed to parse_tagging (object and bucket limits) and
// parse_tagging_header. Whatever is accepted must satisfy validate_tags and survive
// tagging_xml -> parse_tagging and tagging_header -> parse_tagging_header unchanged; every error
// must be MalformedXML / InvalidTag / InvalidArgument with a message. A failure aborts.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "common/limits.hpp"
#include "s3/tagging.hpp"

namespace objdirect::s3 {
namespace {

bool error_ok(const Status& st) {
  return (st.code() == Errc::malformed_xml || st.code() == Errc::invalid_tag ||
          st.code() == Errc::invalid_argument) &&
         !st.message().empty();
}

bool round_trips(const storage::TagSet& tags, std::size_t max_tags) {
  if (tags.size() > max_tags || !validate_tags(tags, max_tags).ok()) return false;
  auto back = parse_tagging(tagging_xml(tags), max_tags);
  if (!back.ok() || *back != tags) return false;
  if (max_tags == limits::object_tags_max) {
    auto hdr = parse_tagging_header(tagging_header(tags));
    if (!hdr.ok() || *hdr != tags) return false;
  }
  return true;
}

}  // namespace

bool tagging_fuzz_one(const std::uint8_t* data, std::size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  for (std::size_t max_tags : {limits::object_tags_max, limits::bucket_tags_max}) {
    auto t = parse_tagging(in, max_tags);
    if (t.ok() ? !round_trips(*t, max_tags) : !error_ok(t.status())) return false;
  }
  auto h = parse_tagging_header(in);
  if (h.ok() ? !round_trips(*h, limits::object_tags_max) : !error_ok(h.status())) return false;
  // The input as one tag's key and value: accepted or refused, never half-written.
  const storage::TagSet one{{std::string(in), std::string(in)}};
  if (validate_tags(one, limits::object_tags_max).ok() && !round_trips(one, 10)) return false;
  return true;
}

}  // namespace objdirect::s3

#ifdef OBJDIRECT_FUZZ_MAIN
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (!objdirect::s3::tagging_fuzz_one(data, size)) std::abort();
  return 0;
}
#endif
