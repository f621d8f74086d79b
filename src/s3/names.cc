#include "s3/names.hpp"

#include <array>
#include <cstdint>
#include <string>

#include "common/limits.hpp"

namespace objdirect::s3 {
namespace {

bool is_lower_alnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}
bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

// "d.d.d.d" with 1..3 digits per group: AWS rejects anything formatted like an IPv4 address,
// whether or not each group is <= 255.
bool looks_like_ipv4(std::string_view s) {
  int groups = 0;
  std::size_t i = 0;
  while (true) {
    std::size_t digits = 0;
    while (i < s.size() && is_digit(s[i])) {
      ++i;
      ++digits;
    }
    if (digits == 0 || digits > 3) return false;
    ++groups;
    if (i == s.size()) return groups == 4;
    if (s[i] != '.') return false;
    ++i;
  }
}

Status bad_bucket(std::string_view name, std::string_view why) {
  std::string msg = "The specified bucket is not valid: ";
  msg += why;
  msg += " (bucket name \"";
  // Bound the echo: the name may be hostile and arbitrarily long.
  msg += name.substr(0, 80);
  if (name.size() > 80) msg += "...";
  msg += "\")";
  return Status(Errc::invalid_bucket_name, std::move(msg));
}

}  // namespace

Status validate_bucket_name(std::string_view name) {
  if (name.size() < limits::bucket_name_min || name.size() > limits::bucket_name_max) {
    return bad_bucket(name, "length must be between 3 and 63 characters");
  }
  for (char c : name) {
    if (!is_lower_alnum(c) && c != '-' && c != '.') {
      return bad_bucket(name,
                        "only lowercase letters, digits, hyphens (-) and dots (.) are allowed");
    }
  }
  if (!is_lower_alnum(name.front()) || !is_lower_alnum(name.back())) {
    return bad_bucket(name, "must begin and end with a lowercase letter or digit");
  }
  if (name.find("..") != std::string_view::npos) {
    return bad_bucket(name, "must not contain two adjacent dots");
  }
  if (looks_like_ipv4(name)) {
    return bad_bucket(name, "must not be formatted as an IP address");
  }
  static constexpr std::array<std::string_view, 3> kReservedPrefixes = {"xn--", "sthree-",
                                                                        "amzn-s3-demo-"};
  for (std::string_view p : kReservedPrefixes) {
    if (name.starts_with(p)) return bad_bucket(name, "uses a reserved prefix");
  }
  static constexpr std::array<std::string_view, 5> kReservedSuffixes = {
      "-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3"};
  for (std::string_view s : kReservedSuffixes) {
    if (name.ends_with(s)) return bad_bucket(name, "uses a reserved suffix");
  }
  return Status::Ok();
}

bool is_valid_utf8(std::string_view s) noexcept {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const std::size_t n = s.size();
  std::size_t i = 0;
  while (i < n) {
    const unsigned char c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    std::size_t len;
    std::uint32_t cp;
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
      cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      cp = c & 0x07;
    } else {
      return false;  // continuation byte as lead, 0xC0/0xC1 (overlong), or > 0xF4
    }
    if (n - i < len) return false;
    for (std::size_t k = 1; k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    if (len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) return false;
    if (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) return false;
    i += len;
  }
  return true;
}

Status validate_object_key(std::string_view key) {
  if (key.empty()) {
    return Status(Errc::invalid_argument, "Object key must not be empty.");
  }
  if (key.size() > limits::key_bytes_max) {
    return Status(Errc::key_too_long, "Your key is too long: " + std::to_string(key.size()) +
                                          " bytes, the maximum is " +
                                          std::to_string(limits::key_bytes_max) + " bytes.");
  }
  if (key.find('\0') != std::string_view::npos) {
    return Status(Errc::invalid_argument,
                  "Object key must not contain a NUL byte (ObjDirect rejects NUL in keys).");
  }
  if (!is_valid_utf8(key)) {
    return Status(Errc::invalid_argument, "Object key is not valid UTF-8.");
  }
  return Status::Ok();
}

}  // namespace objdirect::s3
