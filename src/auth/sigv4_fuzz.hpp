// The body of the SigV4 fuzz target, shared by the libFuzzer binary (sigv4_fuzz, built with
// -DOBJDIRECT_FUZZ=ON and clang++-14) and by sigv4_test, which runs it over fixed seeds.
//
// Thread safety: pure function.
#pragma once

#include <cstddef>
#include <cstdint>

namespace objdirect::sigv4 {

// Interprets the input as lines: the request-target, the Authorization value (may be empty = none),
// then "name:value" headers. Checks that verify() never crashes and that every error carries one
// of the documented codes and a non-empty message; then checks that presign() of the target's path
// always verifies. Returns false when a property is violated (the fuzzer then aborts).
bool fuzz_one(const std::uint8_t* data, std::size_t size);

}  // namespace objdirect::sigv4
