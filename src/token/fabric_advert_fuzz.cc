#include "token/fabric_advert_fuzz.hpp"

#include <cstdlib>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "token/fabric_advert.hpp"

namespace objdirect::token {

namespace {

// The grammar again, written differently (character classes by lookup, items by repeated
// splitting), so that the fuzzer compares two readings of docs/token_format.md.
bool model_accepts_list(std::string_view v, std::vector<std::string>& names) {
  static const std::string name_chars =
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789:_-.+/";
  if (v.size() > limits::fabric_advert_bytes_max) return false;
  std::set<std::string> seen;
  std::string rest(v);
  for (;;) {
    const auto comma = rest.find(',');
    std::string item = rest.substr(0, comma);
    const auto first = item.find_first_not_of(" \t");
    if (first != std::string::npos) {
      item = item.substr(first, item.find_last_not_of(" \t") - first + 1);
      if (item.find_first_not_of(name_chars) != std::string::npos) return false;
      if (item.size() > limits::fabric_name_bytes_max || !seen.insert(item).second) return false;
      names.push_back(item);
    }
    if (comma == std::string::npos) break;
    rest.erase(0, comma + 1);
  }
  return names.size() <= limits::fabric_advert_names_max;
}

bool check_list(std::string_view text) {
  auto parsed = parse_fabric_advert(text);
  std::vector<std::string> model;
  const bool accepts = model_accepts_list(text, model);
  if (parsed.ok() != accepts) return false;
  if (!parsed.ok()) {
    return parsed.code() == Errc::invalid_argument &&
           parsed.status().message().starts_with("x-amz-rdma-fabrics: ");
  }
  const auto& names = *parsed;
  if (names != model || names.size() > limits::fabric_advert_names_max) return false;
  for (const auto& n : names) {
    if (!valid_fabric_name(n)) return false;
  }
  const std::string canonical = format_fabric_advert(names);
  auto again = parse_fabric_advert(canonical);
  if (!again.ok() || *again != names || canonical.size() > text.size()) return false;
  // Canonical input (no blanks, no empty items) comes back byte for byte.
  const bool is_canonical = text.find_first_of(" \t") == std::string_view::npos &&
                            text.find(",,") == std::string_view::npos &&
                            (text.empty() || (text.front() != ',' && text.back() != ','));
  return !is_canonical || canonical == text;
}

bool check_host_id(std::string_view text) {
  auto id = parse_host_id(text);
  if (!id.ok()) {
    return id.code() == Errc::invalid_argument &&
           id.status().message().starts_with("x-amz-rdma-host-id: ");
  }
  if (id->size() != host_id_chars ||
      id->find_first_not_of("0123456789abcdef") != std::string::npos) {
    return false;
  }
  // The id is the text less its blanks.
  const auto first = text.find_first_not_of(" \t");
  if (text.substr(first, text.find_last_not_of(" \t") - first + 1) != *id) return false;
  auto again = parse_host_id(*id);
  return again.ok() && *again == *id;
}

}  // namespace

bool fabric_advert_fuzz_one(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  return check_list(text) && check_host_id(text);
}

}  // namespace objdirect::token

#ifdef OBJDIRECT_FUZZ_MAIN
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (!objdirect::token::fabric_advert_fuzz_one(data, size)) std::abort();
  return 0;
}
#endif
