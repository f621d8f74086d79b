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
#include <string>
#include <string_view>

#include "storage/cache/block_header.hpp"

namespace objdirect::storage::cache {

inline void check_block_header(std::string_view in) {
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

inline void fuzz_block_header_one(const std::uint8_t* data, std::size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  check_block_header(in);
  // Almost every mutation breaks the header CRC. To reach the field checks behind it, also
  // decode a copy whose CRC is recomputed over the length the header claims.
  if (size < cache_limits::header_fixed_bytes) return;
  const std::size_t total = std::size_t(data[6]) | (std::size_t(data[7]) << 8);
  if (total < cache_limits::header_fixed_bytes || total > size) return;
  std::string fixed(in);
  const std::uint32_t crc = block_crc32c(fixed.data(), total - 4);
  for (int i = 0; i < 4; ++i) fixed[total - 4 + i] = static_cast<char>((crc >> (8 * i)) & 0xff);
  check_block_header(fixed);
}

}  // namespace objdirect::storage::cache
