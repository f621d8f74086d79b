// Test-only: the byte mutations the codec tests replay through their fuzz bodies (a few
// replacements, insertions and deletions drawn from `alphabet`), so that `ctest` exercises each
// fuzz target's checks without libFuzzer. Thread safety: none (the caller's rng).
#pragma once

#include <cstddef>
#include <random>
#include <string>
#include <string_view>

namespace objdirect::s3::testing_util {

// `seed` with 1..4 random edits; the same rng draws, in the same order, for a given seed.
inline std::string mutate(const std::string& seed, std::string_view alphabet,
                          std::mt19937_64& rng) {
  std::string s = seed;
  const int edits = 1 + static_cast<int>(rng() % 4);
  for (int e = 0; e < edits; ++e) {
    const std::size_t pos = rng() % s.size();
    const char ch = alphabet[rng() % alphabet.size()];
    switch (rng() % 3) {
      case 0:
        s[pos] = ch;
        break;
      case 1:
        s.insert(s.begin() + static_cast<std::ptrdiff_t>(pos), ch);
        break;
      default:
        if (s.size() > 1) s.erase(pos, 1);
    }
  }
  return s;
}

}  // namespace objdirect::s3::testing_util
