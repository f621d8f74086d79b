// The body of the fabric advertisement fuzz target (fabric_advert_fuzz, built with
// -DOBJDIRECT_FUZZ=ON), shared with fabric_advert_test, which runs it over the checked-in seeds
// (fabric_advert_corpus/) and mutations of them.
//
// Thread safety: pure function.
#pragma once

#include <cstddef>
#include <cstdint>

namespace objdirect::token {

// Feeds data to parse_fabric_advert and parse_host_id and checks their contract
// (fabric_advert.hpp): neither crashes; each accepts exactly what an independent model of the
// grammar accepts; an accepted list holds valid, distinct names within the limits and survives
// format -> parse unchanged (and a value already in canonical form is formatted back byte for
// byte); an accepted host id is 16 lower-case hex digits and parses back to itself; a refusal is
// Errc::invalid_argument with a message naming the header. Returns false on a violation (the
// fuzzer then aborts).
bool fabric_advert_fuzz_one(const std::uint8_t* data, std::size_t size);

}  // namespace objdirect::token
