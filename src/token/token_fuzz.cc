#include "token/token_fuzz.hpp"

#include <cstdlib>
#include <string>
#include <string_view>

#include "token/token.hpp"

namespace objdirect::token {
namespace {

bool check_text(const std::string& text) {
  auto t = decode(text, fuzz_now_unix_s);
  if (!t.ok()) {
    // Garbage is invalid; an expired token and another version of ours are told apart.
    return (t.code() == Errc::invalid_rdma_token || t.code() == Errc::rdma_token_expired ||
            t.code() == Errc::rdma_declined) &&
           !t.status().message().empty();
  }
  // Accepted tokens are canonical: one byte string, one text.
  return validate(*t).ok() && encode(*t) == text;
}

}  // namespace

bool fuzz_one(const std::uint8_t* data, std::size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  if (!check_text(bytes)) return false;
  std::string wrapped(text_prefix);
  wrapped += base64url_encode(bytes);
  if (!check_text(wrapped)) return false;
  auto back = base64url_decode(base64url_encode(bytes));
  return back.ok() && *back == bytes;
}

}  // namespace objdirect::token

#ifdef OBJDIRECT_FUZZ_MAIN
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (!objdirect::token::fuzz_one(data, size)) std::abort();
  return 0;
}
#endif
