#include "token/fabric_advert.hpp"

#include <algorithm>
#include <cstdio>

namespace objdirect::token {

namespace {

bool is_blank(char c) {
  return c == ' ' || c == '\t';
}

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == ':' ||
         c == '_' || c == '-' || c == '.' || c == '+' || c == '/';
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_blank(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_blank(s.back())) s.remove_suffix(1);
  return s;
}

// "byte 0x0a at offset 7": never the raw byte, which may be a control character.
std::string describe_byte(char c, std::size_t offset) {
  char buf[48];
  std::snprintf(buf, sizeof(buf), "byte 0x%02x at offset %zu", static_cast<unsigned char>(c),
                offset);
  return buf;
}

Status bad(std::string what) {
  return Status(Errc::invalid_argument, "x-amz-rdma-fabrics: " + std::move(what));
}

}  // namespace

bool valid_fabric_name(std::string_view name) noexcept {
  return !name.empty() && name.size() <= limits::fabric_name_bytes_max &&
         std::all_of(name.begin(), name.end(), is_name_char);
}

std::string format_fabric_advert(std::span<const std::string> names) {
  std::string out;
  for (const auto& n : names) {
    if (!out.empty()) out += ',';
    out += n;
  }
  return out;
}

Result<std::vector<std::string>> parse_fabric_advert(std::string_view value) {
  if (value.size() > limits::fabric_advert_bytes_max) {
    return bad("value of " + std::to_string(value.size()) + " bytes, at most " +
               std::to_string(limits::fabric_advert_bytes_max));
  }
  std::vector<std::string> names;
  std::size_t start = 0;  // offset of the current item
  while (start <= value.size()) {
    const std::size_t comma = std::min(value.find(',', start), value.size());
    const std::string_view item = value.substr(start, comma - start);
    for (std::size_t i = 0; i < item.size(); ++i) {
      if (!is_name_char(item[i]) && !is_blank(item[i])) {
        return bad("invalid " + describe_byte(item[i], start + i) +
                   " (a fabric name is letters, digits and :_-.+/)");
      }
    }
    const std::string_view name = trim(item);
    if (!name.empty()) {
      if (std::any_of(name.begin(), name.end(), is_blank)) {
        return bad("blank inside the fabric name at offset " + std::to_string(start));
      }
      if (name.size() > limits::fabric_name_bytes_max) {
        return bad("fabric name of " + std::to_string(name.size()) + " bytes at offset " +
                   std::to_string(start) + ", at most " +
                   std::to_string(limits::fabric_name_bytes_max));
      }
      if (std::find(names.begin(), names.end(), name) != names.end()) {
        return bad("fabric '" + std::string(name) + "' named twice");
      }
      if (names.size() == limits::fabric_advert_names_max) {
        return bad("more than " + std::to_string(limits::fabric_advert_names_max) +
                   " fabric names");
      }
      names.emplace_back(name);
    }
    start = comma + 1;
  }
  return names;
}

Result<std::string> parse_host_id(std::string_view value) {
  const std::string_view id = trim(value);
  if (id.size() != host_id_chars) {
    return Status(Errc::invalid_argument, "x-amz-rdma-host-id: " + std::to_string(id.size()) +
                                              " characters, expected " +
                                              std::to_string(host_id_chars) + " hex digits");
  }
  for (std::size_t i = 0; i < id.size(); ++i) {
    const char c = id[i];
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
      const auto offset = static_cast<std::size_t>(id.data() - value.data()) + i;
      return Status(Errc::invalid_argument, "x-amz-rdma-host-id: " + describe_byte(c, offset) +
                                                " is not a lower-case hex digit");
    }
  }
  return std::string(id);
}

}  // namespace objdirect::token
