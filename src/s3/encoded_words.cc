#include "s3/encoded_words.hpp"

#include <optional>

#include "common/ascii.hpp"
#include "common/checksum.hpp"
#include "s3/names.hpp"

namespace objdirect::s3 {

namespace {

constexpr char kHex[] = "0123456789ABCDEF";

bool plain(std::string_view v) {
  for (unsigned char ch : v) {
    if (ch < 0x20 || ch > 0x7E) return false;
  }
  return v.find("=?") == std::string_view::npos;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

std::optional<std::string> decode_q(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '_') {
      out.push_back(' ');
    } else if (c == '=') {
      if (i + 2 >= text.size()) return std::nullopt;
      const int hi = hex_value(text[i + 1]), lo = hex_value(text[i + 2]);
      if (hi < 0 || lo < 0) return std::nullopt;
      out.push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else if (static_cast<unsigned char>(c) > 0x20 && static_cast<unsigned char>(c) < 0x7F &&
               c != '?') {
      out.push_back(c);
    } else {
      return std::nullopt;
    }
  }
  return out;
}

// One word "=?charset?enc?text?=" (the whole of `w`), decoded.
std::optional<std::string> decode_word(std::string_view w) {
  if (w.size() < 8 || !w.starts_with("=?") || !w.ends_with("?=")) return std::nullopt;
  std::string_view inner = w.substr(2, w.size() - 4);
  const std::size_t q1 = inner.find('?');
  if (q1 == std::string_view::npos) return std::nullopt;
  const std::size_t q2 = inner.find('?', q1 + 1);
  if (q2 == std::string_view::npos || q2 != q1 + 2) return std::nullopt;
  std::string_view charset = inner.substr(0, q1), enc = inner.substr(q1 + 1, 1),
                   text = inner.substr(q2 + 1);
  if (const std::size_t star = charset.find('*'); star != std::string_view::npos)
    charset = charset.substr(0, star);  // RFC 2231 language tag
  if (!ascii_iequals(charset, "utf-8") && !ascii_iequals(charset, "us-ascii")) return std::nullopt;
  if (text.find('?') != std::string_view::npos) return std::nullopt;
  if (ascii_iequals(enc, "q")) return decode_q(text);
  if (ascii_iequals(enc, "b")) return base64_decode(text);
  return std::nullopt;
}

}  // namespace

std::string encode_metadata_value(std::string_view value) {
  if (plain(value)) return std::string(value);
  std::string out = "=?UTF-8?Q?";
  for (unsigned char ch : value) {
    if (ch == ' ') {
      out.push_back('_');
    } else if (ch > 0x20 && ch < 0x7F && ch != '=' && ch != '?' && ch != '_') {
      out.push_back(static_cast<char>(ch));
    } else {
      out.push_back('=');
      out.push_back(kHex[ch >> 4]);
      out.push_back(kHex[ch & 0xF]);
    }
  }
  out += "?=";
  return out;
}

std::string decode_metadata_value(std::string_view value) {
  if (value.size() > encoded_words_bytes_max || !value.starts_with("=?")) return std::string(value);
  std::string out;
  std::size_t i = 0;
  while (i < value.size()) {
    // The word runs to the next "?=" that ends it: "=?" charset "?" enc "?" text "?=".
    std::size_t q = value.find('?', i + 2);                        // after charset
    if (q != std::string_view::npos) q = value.find('?', q + 1);   // after encoding
    if (q != std::string_view::npos) q = value.find("?=", q + 1);  // end of text
    if (q == std::string_view::npos) return std::string(value);
    auto word = decode_word(value.substr(i, q + 2 - i));
    if (!word) return std::string(value);
    out += *word;  // whitespace between adjacent words is dropped (RFC 2047 section 6.2)
    i = q + 2;
    while (i < value.size() && (value[i] == ' ' || value[i] == '\t')) ++i;
    if (i < value.size() && !value.substr(i).starts_with("=?")) return std::string(value);
  }
  if (!is_valid_utf8(out)) return std::string(value);
  for (unsigned char ch : out) {
    if ((ch < 0x20 && ch != '\t') || ch == 0x7F) return std::string(value);
  }
  return out;
}

}  // namespace objdirect::s3
