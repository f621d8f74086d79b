// libFuzzer target for the metadata decoders: the local records (meta_codec_fuzz_body.hpp) and
// the RADOS index values built on them (storage/rados/index_codec_fuzz_body.hpp). Build with
//   CXX=clang++-14 cmake -DOBJDIRECT_FUZZ=ON ... && ninja meta_codec_fuzz
//   build/bin/meta_codec_fuzz src/storage/local/fuzz_corpus/
#include <cstddef>
#include <cstdint>

#include "storage/local/meta_codec_fuzz_body.hpp"
#include "storage/rados/index_codec_fuzz_body.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  objdirect::storage::local::fuzz_meta_codec_one(data, size);
  objdirect::storage::rados_impl::fuzz_index_codec_one(data, size);
  return 0;
}
