// The body of the aws-chunked decoder fuzz target, shared by the libFuzzer binary (chunked_fuzz,
// built with -DOBJDIRECT_FUZZ=ON and clang++-14) and by chunked_test, which runs it over seeds.
//
// Thread safety: pure function.
#pragma once

#include <cstddef>
#include <cstdint>

namespace objdirect::s3 {

// The first byte picks the mode (unsigned, signed, signed+trailer, unsigned+trailer) and a split
// size; the rest is the body. Checks: no crash; errors carry a documented code and a message;
// decoded_bytes() equals what the sink received; feeding in one piece, in the chosen split and
// byte by byte gives the same status, output, done() and trailers.
// Returns false when a property is violated (the fuzzer then aborts).
bool chunked_fuzz_one(const std::uint8_t* data, std::size_t size);

}  // namespace objdirect::s3
