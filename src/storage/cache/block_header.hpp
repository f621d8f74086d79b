// The header of one read-through cache block file (storage/cache). The byte format is specified
// in docs/cache_block_format.md; in short, little-endian:
//
//   magic "ODCB" | version u8 = 1 | flags u8 = 0 | header_bytes u16 | object_size u64 |
//   block_index u64 | block_bytes u32 | data_bytes u32 | data_crc32c u32 | bucket_len u16 |
//   key_len u16 | etag_len u16 | reserved u16 = 0 | bucket | key | etag | header_crc32c u32
//
// followed in the file by exactly data_bytes bytes of object data. The identity fields (bucket,
// key, ETag, object size, block size and index) are checked against the block a reader asks for,
// so a hash collision of file names or a stray file is a miss, never wrong bytes; the header CRC
// catches torn or corrupted headers and the data CRC torn or corrupted data.
//
// Thread safety: stateless free functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/limits.hpp"
#include "common/status.hpp"

namespace objdirect::storage::cache {

namespace cache_limits {
// Cache block size bounds (--cache-block-bytes). The upper bound keeps one block's fill buffer
// and its data CRC (one 32-bit length) small.
inline constexpr std::uint64_t block_bytes_min = 64ull << 10;
inline constexpr std::uint64_t block_bytes_max = 64ull << 20;
// Longest ETag a cached object may have; objects with longer ETags pass through uncached.
inline constexpr std::size_t etag_bytes_max = 256;
// Fixed part of a block header: 44 bytes of fields before the names, 4 of header CRC after.
inline constexpr std::size_t header_fixed_bytes = 48;
// Largest possible header: the fixed part plus the longest bucket, key and ETag.
inline constexpr std::size_t header_bytes_max =
    header_fixed_bytes + limits::bucket_name_max + limits::key_bytes_max + etag_bytes_max;
}  // namespace cache_limits

inline constexpr char kBlockMagic[4] = {'O', 'D', 'C', 'B'};
inline constexpr std::uint8_t kBlockVersion = 1;

// The decoded header of a block file.
struct BlockHeader {
  std::string bucket;
  std::string key;
  std::string etag;
  std::uint64_t object_size = 0;
  std::uint64_t block_index = 0;
  std::uint32_t block_bytes = 0;  // the cache's block size when the block was written
  std::uint32_t data_bytes = 0;   // bytes of object data after the header
  std::uint32_t data_crc32c = 0;  // CRC32C (iSCSI polynomial) of those bytes

  bool operator==(const BlockHeader&) const = default;
};

// The number of bytes of object data block `index` holds for an object of `object_size` bytes cut
// into blocks of `block_bytes` (the last block is shorter); 0 when the block lies past the end.
std::uint64_t block_data_bytes(std::uint64_t object_size, std::uint64_t block_bytes,
                               std::uint64_t index) noexcept;

// The encoded header (header_bytes(h) bytes). Requires a header that decode would accept:
// lengths within the limits above and data_bytes consistent with the sizes.
std::string encode_block_header(const BlockHeader& h);

// Size of the encoded header of h.
std::size_t encoded_header_bytes(const BlockHeader& h) noexcept;

// Decodes the header at the start of `in` (which may continue with data). Errc::corrupt for
// anything malformed: wrong magic or version, non-zero flags or reserved bits, lengths over the
// limits, a header CRC mismatch, block size outside cache_limits, or a data length that does not
// match the object size, block size and index. On success *header_bytes_out (if given) receives the
// header's length.
Result<BlockHeader> decode_block_header(std::string_view in,
                                        std::size_t* header_bytes_out = nullptr);

// CRC32C of a byte range, as stored in data_crc32c and header_crc32c.
std::uint32_t block_crc32c(const void* data, std::size_t n) noexcept;

}  // namespace objdirect::storage::cache
