#include "common/uri.hpp"

namespace objdirect {

namespace {

constexpr char kUpperHex[] = "0123456789ABCDEF";

bool is_unreserved(unsigned char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '.' || c == '_' || c == '~';
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Shared by parse_query and try_parse_query: `strict` decides what a bad escape does.
std::optional<QueryPairs> split_query(std::string_view q, bool strict) {
  QueryPairs out;
  while (!q.empty()) {
    std::size_t amp = q.find('&');
    std::string_view piece = q.substr(0, amp);
    q = amp == std::string_view::npos ? std::string_view{} : q.substr(amp + 1);
    if (piece.empty()) continue;
    std::size_t eq = piece.find('=');
    std::string_view name = piece.substr(0, eq);
    std::string_view value =
        eq == std::string_view::npos ? std::string_view{} : piece.substr(eq + 1);
    auto dn = uri_decode(name);
    auto dv = uri_decode(value);
    if (!dn || !dv) {
      if (strict) return std::nullopt;
      out.emplace_back(dn ? std::move(*dn) : std::string(name),
                       dv ? std::move(*dv) : std::string(value));
      continue;
    }
    out.emplace_back(std::move(*dn), std::move(*dv));
  }
  return out;
}

}  // namespace

std::string uri_encode(std::string_view s, bool encode_slash) {
  std::string out;
  out.reserve(s.size() + s.size() / 4);
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    if (is_unreserved(c) || (c == '/' && !encode_slash)) {
      out.push_back(ch);
    } else {
      out.push_back('%');
      out.push_back(kUpperHex[c >> 4]);
      out.push_back(kUpperHex[c & 0xf]);
    }
  }
  return out;
}

std::optional<std::string> uri_decode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out.push_back(s[i]);
      continue;
    }
    if (i + 2 >= s.size()) return std::nullopt;  // needs two more characters
    int hi = hex_value(s[i + 1]);
    int lo = hex_value(s[i + 2]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out.push_back(static_cast<char>((hi << 4) | lo));
    i += 2;
  }
  return out;
}

QueryPairs parse_query(std::string_view raw_query) {
  return std::move(*split_query(raw_query, false));
}

std::optional<QueryPairs> try_parse_query(std::string_view raw_query) {
  return split_query(raw_query, true);
}

}  // namespace objdirect
