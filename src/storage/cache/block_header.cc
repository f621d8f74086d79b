#include "storage/cache/block_header.hpp"

#include <isa-l/crc.h>

#include <cstring>

namespace objdirect::storage::cache {

namespace {

void put16(std::string& out, std::uint16_t v) {
  out.push_back(static_cast<char>(v & 0xff));
  out.push_back(static_cast<char>(v >> 8));
}
void put32(std::string& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void put64(std::string& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
std::uint64_t get_le(std::string_view in, std::size_t at, int bytes) {
  std::uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) {
    v = (v << 8) | static_cast<unsigned char>(in[at + static_cast<std::size_t>(i)]);
  }
  return v;
}

Status bad(const char* why) {
  return Status(Errc::corrupt, std::string("cache block header: ") + why);
}

}  // namespace

std::uint64_t block_data_bytes(std::uint64_t object_size, std::uint64_t block_bytes,
                               std::uint64_t index) noexcept {
  if (block_bytes == 0) return 0;
  const std::uint64_t blocks = object_size / block_bytes + (object_size % block_bytes != 0);
  if (index >= blocks) return 0;
  const std::uint64_t start = index * block_bytes;
  return object_size - start < block_bytes ? object_size - start : block_bytes;
}

std::uint32_t block_crc32c(const void* data, std::size_t n) noexcept {
  // ISA-L takes an int length (feed it in pieces) and the raw register (init ~0, invert at the
  // end: the standard CRC-32C).
  std::uint32_t crc = 0xFFFFFFFFu;
  auto* p = static_cast<unsigned char*>(const_cast<void*>(data));
  while (n > 0) {
    const std::size_t piece = n < (1u << 30) ? n : (1u << 30);
    crc = crc32_iscsi(p, static_cast<int>(piece), crc);
    p += piece;
    n -= piece;
  }
  return ~crc;
}

std::size_t encoded_header_bytes(const BlockHeader& h) noexcept {
  return cache_limits::header_fixed_bytes + h.bucket.size() + h.key.size() + h.etag.size();
}

std::string encode_block_header(const BlockHeader& h) {
  std::string out;
  const std::size_t total = encoded_header_bytes(h);
  out.reserve(total);
  out.append(kBlockMagic, 4);
  out.push_back(static_cast<char>(kBlockVersion));
  out.push_back(0);  // flags
  put16(out, static_cast<std::uint16_t>(total));
  put64(out, h.object_size);
  put64(out, h.block_index);
  put32(out, h.block_bytes);
  put32(out, h.data_bytes);
  put32(out, h.data_crc32c);
  put16(out, static_cast<std::uint16_t>(h.bucket.size()));
  put16(out, static_cast<std::uint16_t>(h.key.size()));
  put16(out, static_cast<std::uint16_t>(h.etag.size()));
  put16(out, 0);  // reserved
  out += h.bucket;
  out += h.key;
  out += h.etag;
  put32(out, block_crc32c(out.data(), out.size()));
  return out;
}

Result<BlockHeader> decode_block_header(std::string_view in, std::size_t* header_bytes_out) {
  using namespace cache_limits;
  if (in.size() < header_fixed_bytes) return bad("too short");
  if (std::memcmp(in.data(), kBlockMagic, 4) != 0) return bad("bad magic");
  if (static_cast<std::uint8_t>(in[4]) != kBlockVersion) return bad("unknown version");
  if (in[5] != 0) return bad("unknown flags");
  const auto total = static_cast<std::size_t>(get_le(in, 6, 2));
  BlockHeader h;
  h.object_size = get_le(in, 8, 8);
  h.block_index = get_le(in, 16, 8);
  h.block_bytes = static_cast<std::uint32_t>(get_le(in, 24, 4));
  h.data_bytes = static_cast<std::uint32_t>(get_le(in, 28, 4));
  h.data_crc32c = static_cast<std::uint32_t>(get_le(in, 32, 4));
  const auto bucket_len = static_cast<std::size_t>(get_le(in, 36, 2));
  const auto key_len = static_cast<std::size_t>(get_le(in, 38, 2));
  const auto etag_len = static_cast<std::size_t>(get_le(in, 40, 2));
  if (get_le(in, 42, 2) != 0) return bad("reserved bits set");
  if (bucket_len == 0 || bucket_len > limits::bucket_name_max) return bad("bucket length");
  if (key_len == 0 || key_len > limits::key_bytes_max) return bad("key length");
  if (etag_len > etag_bytes_max) return bad("etag length");
  if (total != header_fixed_bytes + bucket_len + key_len + etag_len) return bad("header length");
  if (in.size() < total) return bad("truncated");
  const std::uint32_t want_crc = static_cast<std::uint32_t>(get_le(in, total - 4, 4));
  if (block_crc32c(in.data(), total - 4) != want_crc) return bad("header checksum mismatch");
  if (h.block_bytes < block_bytes_min || h.block_bytes > block_bytes_max) return bad("block size");
  if (h.data_bytes == 0 ||
      h.data_bytes != block_data_bytes(h.object_size, h.block_bytes, h.block_index)) {
    return bad("data length does not match the object size and block index");
  }
  std::size_t at = header_fixed_bytes - 4;
  h.bucket.assign(in.substr(at, bucket_len));
  at += bucket_len;
  h.key.assign(in.substr(at, key_len));
  at += key_len;
  h.etag.assign(in.substr(at, etag_len));
  if (header_bytes_out != nullptr) *header_bytes_out = total;
  return h;
}

}  // namespace objdirect::storage::cache
