// libFuzzer target for the metadata decoders. Build with
//   CXX=clang++-14 cmake -DOBJDIRECT_FUZZ=ON ... && ninja meta_codec_fuzz
//   build/bin/meta_codec_fuzz src/storage/local/fuzz_corpus/
#include <cstddef>
#include <cstdint>

#include "storage/local/meta_codec_fuzz_body.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  objdirect::storage::local::fuzz_meta_codec_one(data, size);
  return 0;
}
