// The body of the UCX peer address fuzz target (peer_address_fuzz, built with
// -DOBJDIRECT_FUZZ=ON), shared with peer_address_test, which runs it over the checked-in seeds
// (peer_address_corpus/) and mutations of them.
//
// Thread safety: pure function.
#pragma once

#include <cstddef>
#include <cstdint>

namespace objdirect::transport::ucx {

// Feeds data to decode_peer_address and checks its contract (peer_address.hpp): it never
// crashes; bytes with a well-formed prefix give their namespace and the rest as the worker
// address, and encode gives back the input byte for byte; any other bytes come back whole as a
// bare worker address; and an arbitrary worker address (the input itself, when not empty)
// survives encode -> decode with any namespace. Returns false on a violation (the fuzzer then
// aborts).
bool peer_address_fuzz_one(const std::uint8_t* data, std::size_t size);

}  // namespace objdirect::transport::ucx
