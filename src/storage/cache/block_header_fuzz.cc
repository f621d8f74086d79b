// libFuzzer target for the cache block header decoder. Built by scripts/fuzz.sh (`make fuzz`);
// run by hand: build-asan/bin/block_header_fuzz src/storage/cache/block_header_corpus/
#include <cstddef>
#include <cstdint>

#include "storage/cache/block_header_fuzz_body.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  objdirect::storage::cache::fuzz_block_header_one(data, size);
  return 0;
}
