// libFuzzer target for the CORSConfiguration parser and the rule matcher (built with
// -DOBJDIRECT_FUZZ=ON; see CMakeLists.txt). cors_fuzz_one is also replayed by cors_test.cc so the
// ordinary build checks it. An accepted document must satisfy the documented rule limits and
// survive cors_xml -> parse_cors unchanged; an error must be MalformedXML or InvalidRequest with
// a message; the matcher must never crash on any origin/method/header text. A failure aborts.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "common/limits.hpp"
#include "s3/cors.hpp"

namespace objdirect::s3 {

bool cors_fuzz_one(const std::uint8_t* data, std::size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  auto rules = parse_cors(in);
  if (!rules.ok()) {
    const Errc e = rules.status().code();
    return (e == Errc::malformed_xml || e == Errc::invalid_request) &&
           !rules.status().message().empty();
  }
  if (rules->empty() || rules->size() > limits::cors_rules_max) return false;
  for (const CorsRule& r : *rules) {
    if (r.allowed_origins.empty() || r.allowed_methods.empty()) return false;
  }
  auto back = parse_cors(cors_xml(*rules));
  if (!back.ok() || *back != *rules) return false;
  // The input, split in three, as origin / method / headers.
  const std::size_t third = size / 3;
  (void)match_cors(*rules, in.substr(0, third), in.substr(third, third), in.substr(2 * third));
  for (const CorsRule& r : *rules) {
    for (const auto& o : r.allowed_origins) {
      // A pattern without '*' matches itself.
      if (o.find('*') == std::string::npos && !cors_wildcard_match(o, o, false)) return false;
    }
  }
  return true;
}

}  // namespace objdirect::s3

#ifdef OBJDIRECT_FUZZ_MAIN
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (!objdirect::s3::cors_fuzz_one(data, size)) std::abort();
  return 0;
}
#endif
