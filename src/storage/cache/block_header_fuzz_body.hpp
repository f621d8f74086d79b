// The one fuzz body for the cache block header decoder, shared by the libFuzzer target
// (block_header_fuzz.cc, built with OBJDIRECT_FUZZ=ON) and the seed-corpus gtest
// (block_header_test.cc), so CI runs the same checks the fuzzer does.
//
// Properties checked for every input: the decoder never crashes or reads out of bounds (the
// sanitizers and the fuzzer catch that); whatever decodes re-encodes to exactly the header bytes
// of the input (the encoding is canonical) and reports that length. A violated property aborts.
//
// Thread safety: stateless.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "storage/cache/block_header.hpp"

namespace objdirect::storage::cache {

inline void fuzz_block_header_one(const std::uint8_t* data, std::size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  std::size_t len = 0;
  auto h = decode_block_header(in, &len);
  if (!h.ok()) return;
  if (len > in.size() || len != encoded_header_bytes(*h)) std::abort();
  if (encode_block_header(*h) != in.substr(0, len)) std::abort();
  if (h->data_bytes == 0 ||
      h->data_bytes != block_data_bytes(h->object_size, h->block_bytes, h->block_index)) {
    std::abort();
  }
}

}  // namespace objdirect::storage::cache
