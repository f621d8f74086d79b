// ASCII helpers for protocol tokens (header names, algorithm names, charsets): case folding of
// A-Z only, whatever the locale.
//
// Thread safety: pure functions, safe from any thread.
#pragma once

#include <cstddef>
#include <string_view>

namespace objdirect {

// Whether a and b are equal ignoring the case of ASCII letters.
inline bool ascii_iequals(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

}  // namespace objdirect
