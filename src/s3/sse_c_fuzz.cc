// libFuzzer target for the three-header SSE-C key parser, CustomerKey::parse (built with
// -DOBJDIRECT_FUZZ=ON; see CMakeLists.txt). sse_c_fuzz_one is also replayed by sse_c_test.cc
// over the checked-in seeds (sse_c_corpus/) and their mutations, so the ordinary build checks it.
//
// Input: the first byte's low three bits say which headers are present (1: algorithm, 2: key,
// 4: key-MD5); the rest is their values in that order, separated by '\n' (a missing separator
// leaves the later values empty). Invariants, checked against an independent recomputation with
// base64_decode and Md5: parse accepts exactly when the algorithm is AES256, the key decodes to
// 32 bytes and the MD5 is base64 of the key's MD5; an accepted key round-trips (the headers
// rebuilt from raw() parse to the same key, and from_raw gives the same MD5); a refusal is
// invalid_argument with AWS's message for the first header at fault. A failure aborts.
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include "common/checksum.hpp"
#include "s3/sse_c.hpp"

namespace objdirect::s3 {

namespace {

std::string md5_b64(std::string_view raw) {
  Md5 md5;
  md5.update(raw.data(), raw.size());
  return base64_encode(md5.raw());
}

// The message AWS gives for headers h (empty: accepted), computed without CustomerKey.
std::string expected_error(const SseCHeaders& h) {
  if (!h.algorithm || *h.algorithm != sse_c_algorithm) return "valid encryption algorithm";
  if (!h.key || h.key->empty()) return "appropriate secret key";
  auto raw = base64_decode(*h.key);
  if (!raw || raw->size() != sse_c_key_bytes) return "The secret key was invalid";
  if (!h.key_md5 || h.key_md5->empty()) return "client calculated MD5";
  if (md5_b64(*raw) != *h.key_md5) return "The calculated MD5 hash of the key did not match";
  return {};
}

}  // namespace

bool sse_c_fuzz_one(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return true;
  const unsigned present = data[0];
  std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  SseCHeaders h;
  std::optional<std::string>* fields[] = {&h.algorithm, &h.key, &h.key_md5};
  for (unsigned i = 0; i < 3; ++i) {
    const auto nl = rest.find('\n');
    const std::string_view value = rest.substr(0, nl);
    rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
    if (present & (1u << i)) *fields[i] = std::string(value);
  }
  if (!h.any()) return true;  // parse's precondition: the caller asks only when a header came
  const std::string want = expected_error(h);
  auto k = CustomerKey::parse(h);
  if (!want.empty()) {
    return !k.ok() && k.code() == Errc::invalid_argument &&
           k.status().message().find(want) != std::string::npos;
  }
  if (!k.ok() || k->raw().size() != sse_c_key_bytes || k->key_md5() != *h.key_md5) return false;
  // Round trip: the headers a client builds from the raw key parse to the same key (strict
  // base64 has one spelling, so they are the headers given).
  const std::string raw(k->raw());
  const SseCHeaders again{std::string(sse_c_algorithm), base64_encode(raw), md5_b64(raw)};
  if (again.key != h.key) return false;
  auto k2 = CustomerKey::parse(again);
  if (!k2.ok() || k2->raw() != raw) return false;
  if (CustomerKey::from_raw(raw).key_md5() != *h.key_md5) return false;
  // A copy holds the same key; verifiers recognise it and only it.
  const CustomerKey copy = *k;
  const std::string salt(sse_c_salt_bytes, '\x5a');
  const std::string mac = key_verifier(salt, copy);
  if (!key_matches(salt, mac, *k2)) return false;
  std::string other = raw;
  other[0] = static_cast<char>(other[0] ^ 1);
  return !key_matches(salt, mac, CustomerKey::from_raw(other));
}

}  // namespace objdirect::s3

#ifdef OBJDIRECT_FUZZ_MAIN
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (!objdirect::s3::sse_c_fuzz_one(data, size)) std::abort();
  return 0;
}
#endif
