// libFuzzer target for the bucket policy parser and evaluator (built with -DOBJDIRECT_FUZZ=ON;
// see CMakeLists.txt). policy_fuzz_one is also replayed by policy_test.cc so the ordinary build
// checks it. The input is a policy document for bucket "b": an accepted one must round-trip
// through policy_json unchanged and evaluate (for a few fixed requests) without crashing and
// identically after the round trip; a refused one must be MalformedPolicy with a message.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "common/limits.hpp"
#include "s3/policy.hpp"

namespace objdirect::s3 {

bool policy_fuzz_one(const std::uint8_t* data, std::size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  auto p = parse_policy(in, "b");
  if (!p.ok()) {
    return p.status().code() == Errc::malformed_policy && !p.status().message().empty();
  }
  if (p->statements.empty() || p->statements.size() > limits::policy_statements_max) return false;
  auto back = parse_policy(policy_json(*p), "b");
  if (!back.ok() || *back != *p) return false;
  const PolicyRequest reqs[] = {
      {"", "s3:GetObject", "arn:aws:s3:::b/k", "127.0.0.1", false, {}},
      {"alice", "s3:ListBucket", "arn:aws:s3:::b", "10.1.2.3", true, {{"s3:prefix", "home/"}}},
      {"bob", "s3:PutObject", "arn:aws:s3:::b/x/y", "::1", false, {}},
  };
  for (const PolicyRequest& r : reqs) {
    if (evaluate_policy(*p, r) != evaluate_policy(*back, r)) return false;
  }
  return true;
}

}  // namespace objdirect::s3

#ifdef OBJDIRECT_FUZZ_MAIN
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (!objdirect::s3::policy_fuzz_one(data, size)) std::abort();
  return 0;
}
#endif
