// libFuzzer target for the LifecycleConfiguration parser (built with -DOBJDIRECT_FUZZ=ON; see
// src/s3/CMakeLists.txt). lifecycle_fuzz_one is also replayed by lifecycle_test.cc so the
// ordinary build checks it. An accepted document must hold 1..lifecycle_rules_max rules, each
// with an action, and survive lifecycle_xml -> parse_lifecycle unchanged; a refused one must
// carry one of the documented codes and a message. A failure aborts.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "common/limits.hpp"
#include "s3/lifecycle.hpp"

namespace objdirect::s3 {

bool lifecycle_fuzz_one(const std::uint8_t* data, std::size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  auto rules = parse_lifecycle(in);
  if (!rules.ok()) {
    const Errc e = rules.status().code();
    return (e == Errc::malformed_xml || e == Errc::invalid_argument || e == Errc::invalid_request ||
            e == Errc::not_implemented) &&
           !rules.status().message().empty();
  }
  if (rules->empty() || rules->size() > limits::lifecycle_rules_max) return false;
  for (const LifecycleRule& r : *rules) {
    if (!r.expiration_days && !r.expiration_date_s && !r.expired_object_delete_marker &&
        !r.noncurrent_days && !r.abort_days) {
      return false;
    }
    (void)lifecycle_matches(r, in, size, r.tags);
  }
  auto back = parse_lifecycle(lifecycle_xml(*rules));
  return back.ok() && *back == *rules;
}

}  // namespace objdirect::s3

#ifdef OBJDIRECT_FUZZ_MAIN
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (!objdirect::s3::lifecycle_fuzz_one(data, size)) std::abort();
  return 0;
}
#endif
