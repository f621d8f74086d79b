// The body of the binding fuzz target, shared by the libFuzzer binary (binding_fuzz, built with
// -DOBJDIRECT_FUZZ=ON) and by binding_test, which runs it over fixed seeds.
//
// Thread safety: pure function.
#pragma once

#include <cstddef>
#include <cstdint>

namespace objdirect::token {

// Feeds data to decode_challenge() (never crashes; what it accepts re-encodes to the same text)
// and replays it as a sequence of operations on a small ReplayCache and BindingTable, checking
// each answer against a plain model: a nonce is accepted exactly once until its expiry, the
// cache never holds more than its limit and refuses (full) rather than forgetting, a binding
// table holds at most its limit, evicts the least recently used entry and expires entries.
// Returns false when a property is violated (the fuzzer then aborts).
bool binding_fuzz_one(const std::uint8_t* data, std::size_t size);

}  // namespace objdirect::token
