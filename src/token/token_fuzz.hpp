// The body of the token fuzz target, shared by the libFuzzer binary (token_fuzz, built with
// -DOBJDIRECT_FUZZ=ON) and by token_test, which runs it over fixed seeds.
//
// Thread safety: pure function.
#pragma once

#include <cstddef>
#include <cstdint>

namespace objdirect::token {

// The clock the fuzz body decodes against; seeds should expire a little after it.
inline constexpr std::uint64_t fuzz_now_unix_s = 1'700'000'000;

// Feeds data to decode() both as token text and (base64url-wrapped with the "OD1." prefix) as a
// binary token, and checks the codec's properties: decode never crashes; whatever it accepts
// passes validate() and re-encodes to exactly the same text; base64url round-trips.
// Returns false when a property is violated (the fuzzer then aborts).
bool fuzz_one(const std::uint8_t* data, std::size_t size);

}  // namespace objdirect::token
