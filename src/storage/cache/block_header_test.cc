// The cache block header codec (docs/cache_block_format.md): round trip, every rejection, the
// checked-in seed corpus and deterministic mutations of it through the fuzz body.
#include "storage/cache/block_header.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "storage/cache/block_header_fuzz_body.hpp"

namespace objdirect::storage::cache {
namespace {

BlockHeader sample() {
  BlockHeader h;
  h.bucket = "bucket-1";
  h.key = std::string("dir/k\xc3\xa9y\0x", 11);
  h.etag = "0123456789abcdef0123456789abcdef-3";
  h.block_bytes = 4u << 20;
  h.object_size = 10ull << 20;
  h.block_index = 2;
  h.data_bytes = 2u << 20;
  h.data_crc32c = 0xdeadbeef;
  return h;
}

void run(const std::string& s) {
  fuzz_block_header_one(reinterpret_cast<const std::uint8_t*>(s.data()), s.size());
}

TEST(BlockHeader, RoundTrip) {
  const BlockHeader h = sample();
  const std::string enc = encode_block_header(h);
  EXPECT_EQ(enc.size(), encoded_header_bytes(h));
  EXPECT_EQ(enc.size(),
            cache_limits::header_fixed_bytes + h.bucket.size() + h.key.size() + h.etag.size());
  EXPECT_EQ(enc.substr(0, 4), "ODCB");
  std::size_t len = 0;
  auto d = decode_block_header(enc + "trailing object data", &len);
  ASSERT_TRUE(d.ok()) << d.status().to_string();
  EXPECT_EQ(*d, h);
  EXPECT_EQ(len, enc.size());
  run(enc);
}

TEST(BlockHeader, LayoutIsLittleEndianAsDocumented) {
  BlockHeader h = sample();
  h.bucket = "b";
  h.key = "k";
  h.etag = "e";
  h.object_size = 0x10000;  // one block of 64 KiB
  h.block_bytes = 0x10000;
  h.block_index = 0;
  h.data_bytes = 0x10000;
  h.data_crc32c = 0x04030201;
  const std::string enc = encode_block_header(h);
  ASSERT_EQ(enc.size(), 51u);
  EXPECT_EQ(enc[4], 1);                                              // version
  EXPECT_EQ(enc[6], 51);                                             // header_bytes, low byte
  EXPECT_EQ(enc[8 + 2], 1);                                          // object_size 0x10000
  EXPECT_EQ(enc[24 + 2], 1);                                         // block_bytes 0x10000
  EXPECT_EQ(enc.substr(32, 4), std::string("\x01\x02\x03\x04", 4));  // data_crc32c
  EXPECT_EQ(enc.substr(44, 3), "bke");
  const std::uint32_t crc = block_crc32c(enc.data(), 47);
  EXPECT_EQ(static_cast<unsigned char>(enc[47]), crc & 0xff);
  EXPECT_EQ(static_cast<unsigned char>(enc[50]), crc >> 24);
}

TEST(BlockHeader, Crc32cKnownValue) {
  // RFC 3720 B.4: CRC32C of 32 zero bytes.
  const std::string zeros(32, '\0');
  EXPECT_EQ(block_crc32c(zeros.data(), zeros.size()), 0x8a9136aau);
}

TEST(BlockHeader, DataBytesOfBlocks) {
  EXPECT_EQ(block_data_bytes(10, 4, 0), 4u);
  EXPECT_EQ(block_data_bytes(10, 4, 2), 2u);
  EXPECT_EQ(block_data_bytes(10, 4, 3), 0u);
  EXPECT_EQ(block_data_bytes(8, 4, 2), 0u);
  EXPECT_EQ(block_data_bytes(0, 4, 0), 0u);
  EXPECT_EQ(block_data_bytes(~0ull, 1ull << 26, (~0ull >> 26)), (~0ull) & ((1ull << 26) - 1));
}

TEST(BlockHeader, RejectsEveryMalformation) {
  const std::string good = encode_block_header(sample());
  auto rejects = [](std::string s, const char* what) {
    auto d = decode_block_header(s);
    EXPECT_FALSE(d.ok()) << what;
    if (!d.ok()) {
      EXPECT_EQ(d.code(), Errc::corrupt) << what;
    }
  };
  // Re-encodes after editing a field, so that only that field is wrong (CRC recomputed).
  auto with_crc = [](std::string s) {
    const std::uint32_t crc = block_crc32c(s.data(), s.size() - 4);
    for (int i = 0; i < 4; ++i) s[s.size() - 4 + i] = static_cast<char>((crc >> (8 * i)) & 0xff);
    return s;
  };
  rejects("", "empty");
  rejects(good.substr(0, 47), "shorter than the fixed part");
  rejects(good.substr(0, good.size() - 1), "truncated names");
  std::string s = good;
  s[0] = 'X';
  rejects(with_crc(s), "magic");
  s = good;
  s[4] = 2;
  rejects(with_crc(s), "version");
  s = good;
  s[5] = 1;
  rejects(with_crc(s), "flags");
  s = good;
  s[42] = 1;
  rejects(with_crc(s), "reserved");
  s = good;
  s[6] = static_cast<char>(s[6] + 1);
  rejects(with_crc(s), "header length");
  s = good;
  s[good.size() - 1] ^= 1;
  rejects(s, "header crc");
  s = good;
  s[50] ^= 1;  // a byte of the key, CRC not recomputed
  rejects(s, "name bytes under the crc");
  BlockHeader h = sample();
  h.data_bytes += 1;
  rejects(encode_block_header(h), "data length");
  h = sample();
  h.block_index = 3;  // past the end of a 10 MiB object in 4 MiB blocks
  h.data_bytes = 0;
  rejects(encode_block_header(h), "block past the end");
  h = sample();
  h.block_bytes = cache_limits::block_bytes_min - 1;
  h.object_size = h.data_bytes = h.block_bytes;
  h.block_index = 0;
  rejects(encode_block_header(h), "block size under the minimum");
  h = sample();
  h.block_bytes = static_cast<std::uint32_t>(cache_limits::block_bytes_max + 1);
  h.object_size = h.data_bytes = h.block_bytes;
  h.block_index = 0;
  rejects(encode_block_header(h), "block size over block_bytes_max");
  h = sample();
  h.bucket = std::string(limits::bucket_name_max + 1, 'b');
  rejects(encode_block_header(h), "bucket over bucket_name_max");
  h = sample();
  h.key = std::string(limits::key_bytes_max + 1, 'k');
  rejects(encode_block_header(h), "key over key_bytes_max");
  h = sample();
  h.key.clear();
  rejects(encode_block_header(h), "empty key");
  h = sample();
  h.etag = std::string(cache_limits::etag_bytes_max + 1, 'e');
  rejects(encode_block_header(h), "etag over etag_bytes_max");
}

TEST(BlockHeader, LongestHeaderFitsHeaderBytesMax) {
  BlockHeader h = sample();
  h.bucket = std::string(limits::bucket_name_max, 'b');
  h.key = std::string(limits::key_bytes_max, 'k');
  h.etag = std::string(cache_limits::etag_bytes_max, 'e');
  const std::string enc = encode_block_header(h);
  EXPECT_EQ(enc.size(), cache_limits::header_bytes_max);
  auto d = decode_block_header(enc);
  ASSERT_TRUE(d.ok()) << d.status().to_string();
  EXPECT_EQ(*d, h);
}

std::vector<std::string> load_corpus() {
  std::vector<std::string> seeds;
  for (const auto& e : std::filesystem::directory_iterator(OBJDIRECT_BLOCK_HEADER_CORPUS_DIR)) {
    std::ifstream in(e.path(), std::ios::binary);
    seeds.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  return seeds;
}

TEST(BlockHeaderCorpus, SeedsDecode) {
  const auto seeds = load_corpus();
  ASSERT_GE(seeds.size(), 3u);
  for (const std::string& s : seeds) {
    EXPECT_TRUE(decode_block_header(s).ok()) << "seed of " << s.size() << " bytes";
    run(s);
  }
}

TEST(BlockHeaderCorpus, MutatedSeedsNeverCrash) {
  const auto seeds = load_corpus();
  std::mt19937_64 rng(777);
  int decoded = 0;
  for (const std::string& seed : seeds) {
    for (int round = 0; round < 5000; ++round) {
      std::string s = seed;
      const int edits = 1 + static_cast<int>(rng() % 3);
      for (int e = 0; e < edits; ++e) {
        const std::size_t pos = s.empty() ? 0 : rng() % s.size();
        switch (rng() % 4) {
          case 0:
            if (!s.empty()) s[pos] = static_cast<char>(s[pos] ^ (1 << (rng() % 8)));
            break;
          case 1:
            s.resize(pos);
            break;
          case 2:
            s.insert(s.begin() + static_cast<std::ptrdiff_t>(pos), static_cast<char>(rng()));
            break;
          default:
            if (!s.empty()) s.erase(pos, 1);
            break;
        }
      }
      run(s);
      decoded += decode_block_header(s).ok();
    }
  }
  // Almost every mutation breaks the header CRC; a few land in the trailing data bytes.
  EXPECT_LT(decoded, 5000 * static_cast<int>(seeds.size()));
}

// Regenerates the checked-in seeds: block_header_test --gtest_also_run_disabled_tests
//   --gtest_filter=BlockHeaderCorpus.DISABLED_WriteSeeds
TEST(BlockHeaderCorpus, DISABLED_WriteSeeds) {
  std::vector<std::pair<std::string, std::string>> seeds;
  BlockHeader h = sample();
  seeds.emplace_back("middle_block", encode_block_header(h) + std::string(16, 'd'));
  h.block_index = 0;
  h.data_bytes = 4u << 20;
  seeds.emplace_back("first_block", encode_block_header(h));
  h.bucket = "b12";
  h.key = "k";
  h.etag = "";
  h.block_bytes = 64u << 10;
  h.object_size = 100;
  h.data_bytes = 100;
  seeds.emplace_back("small_object", encode_block_header(h));
  for (const auto& [name, bytes] : seeds) {
    std::ofstream out(std::string(OBJDIRECT_BLOCK_HEADER_CORPUS_DIR) + "/" + name,
                      std::ios::binary);
    out << bytes;
  }
}

}  // namespace
}  // namespace objdirect::storage::cache
