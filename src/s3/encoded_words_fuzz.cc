// libFuzzer target for encode_metadata_value/decode_metadata_value (built with -DOBJDIRECT_FUZZ=ON;
// see CMakeLists.txt). encoded_words_fuzz_one is also replayed by encoded_words_test.cc so the
// ordinary build checks it. Input: a metadata value. Every invariant failure aborts.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "s3/encoded_words.hpp"
#include "s3/names.hpp"

namespace objdirect::s3 {

namespace {

bool printable_ascii(std::string_view s) {
  for (unsigned char ch : s) {
    if (ch < 0x20 || ch > 0x7E) return false;
  }
  return true;
}

// What decode_metadata_value can give back: valid UTF-8 with no control character but tab.
bool decodable_text(std::string_view s) {
  if (!is_valid_utf8(s)) return false;
  for (unsigned char ch : s) {
    if ((ch < 0x20 && ch != '\t') || ch == 0x7F) return false;
  }
  return true;
}

}  // namespace

bool encoded_words_fuzz_one(const std::uint8_t* data, std::size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  // Encoding: always printable ASCII, the identity on plain values, and decoded back exactly.
  const std::string enc = encode_metadata_value(in);
  if (!printable_ascii(enc)) return false;
  if (printable_ascii(in) && in.find("=?") == std::string_view::npos && enc != in) return false;
  if (enc.size() <= encoded_words_bytes_max && decodable_text(in) &&
      decode_metadata_value(enc) != in)
    return false;
  // Decoding arbitrary input: the input unchanged, or text that is itself decodable and that
  // survives another encode/decode round trip.
  const std::string dec = decode_metadata_value(in);
  if (dec != in) {
    if (!decodable_text(dec)) return false;
    const std::string again = encode_metadata_value(dec);
    if (again.size() <= encoded_words_bytes_max && decode_metadata_value(again) != dec)
      return false;
  }
  return true;
}

}  // namespace objdirect::s3

#ifdef OBJDIRECT_FUZZ_MAIN
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (!objdirect::s3::encoded_words_fuzz_one(data, size)) std::abort();
  return 0;
}
#endif
