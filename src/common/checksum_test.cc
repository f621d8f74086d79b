#include "common/checksum.hpp"

#include <gtest/gtest.h>

#include <random>
#include <string>

namespace objdirect {
namespace {

std::string crc_hex(ChecksumAlgo algo, std::string_view data) {
  Checksummer c(algo);
  c.update(data.data(), data.size());
  return hex_encode(c.digest_raw());
}

TEST(Checksum, Names) {
  EXPECT_EQ(checksum_name(ChecksumAlgo::crc64nvme), "CRC64NVME");
  EXPECT_EQ(checksum_header(ChecksumAlgo::crc32c), "x-amz-checksum-crc32c");
  EXPECT_EQ(checksum_header(ChecksumAlgo::sha256), "x-amz-checksum-sha256");
  EXPECT_EQ(checksum_from_name("crc32c"), ChecksumAlgo::crc32c);
  EXPECT_EQ(checksum_from_name("CRC32"), ChecksumAlgo::crc32);
  EXPECT_EQ(checksum_from_name("Crc64Nvme"), ChecksumAlgo::crc64nvme);
  EXPECT_EQ(checksum_from_name("sha1"), ChecksumAlgo::sha1);
  EXPECT_FALSE(checksum_from_name("crc33").has_value());
  EXPECT_FALSE(checksum_from_name("").has_value());
  for (ChecksumAlgo a : kAllChecksumAlgos) {
    EXPECT_EQ(checksum_from_name(checksum_name(a)), a);
    Checksummer c(a);
    EXPECT_EQ(c.digest_raw().size(), checksum_raw_size(a));
  }
}

// The standard CRC catalogue check values over "123456789".
TEST(Checksum, CrcCheckValues) {
  EXPECT_EQ(crc_hex(ChecksumAlgo::crc32, "123456789"), "cbf43926");
  EXPECT_EQ(crc_hex(ChecksumAlgo::crc32c, "123456789"), "e3069283");
  EXPECT_EQ(crc_hex(ChecksumAlgo::crc64nvme, "123456789"), "ae8b14860a799888");
  EXPECT_EQ(crc_hex(ChecksumAlgo::crc32, ""), "00000000");
  EXPECT_EQ(crc_hex(ChecksumAlgo::crc32c, ""), "00000000");
  EXPECT_EQ(crc_hex(ChecksumAlgo::crc64nvme, ""), "0000000000000000");
}

TEST(Checksum, ShaVectors) {
  EXPECT_EQ(crc_hex(ChecksumAlgo::sha1, "abc"), "a9993e364706816aba3e25717850c26c9cd0d89d");
  EXPECT_EQ(crc_hex(ChecksumAlgo::sha256, "abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  Checksummer empty(ChecksumAlgo::sha256);
  EXPECT_EQ(empty.digest_base64(), "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=");
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  Md5 md5;
  EXPECT_EQ(md5.hex(), "d41d8cd98f00b204e9800998ecf8427e");
  md5.update("abc", 3);
  EXPECT_EQ(md5.hex(), "900150983cd24fb0d6963f7d28e17f72");
  EXPECT_EQ(md5.raw().size(), 16u);
  Sha256 sha;
  sha.update("ab", 2);
  sha.update("c", 1);
  EXPECT_EQ(sha.hex(), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

// S3 wire form: the AWS SigV4 trailer example carries CRC32C of 66560 'a' as "sOO8/Q==".
TEST(Checksum, AwsTrailerExampleCrc32c) {
  std::string a(66560, 'a');
  Checksummer c(ChecksumAlgo::crc32c);
  c.update(a.data(), a.size());
  EXPECT_EQ(c.digest_base64(), "sOO8/Q==");
  Checksummer z(ChecksumAlgo::crc32);
  z.update(a.data(), a.size());
  EXPECT_EQ(z.digest_base64(), "sK4Y7A==");  // zlib.crc32, big-endian, base64
  Checksummer empty(ChecksumAlgo::crc32);
  EXPECT_EQ(empty.digest_base64(), "AAAAAA==");
}

TEST(Checksum, StreamingEqualsOneShotOnRandomSplits) {
  std::mt19937_64 rng(42);
  std::string data(100'003, '\0');
  for (auto& ch : data) ch = static_cast<char>(rng());
  for (ChecksumAlgo a : kAllChecksumAlgos) {
    Checksummer whole(a);
    whole.update(data.data(), data.size());
    for (int round = 0; round < 20; ++round) {
      Checksummer parts(a);
      std::size_t pos = 0;
      while (pos < data.size()) {
        std::size_t n = std::min<std::size_t>(data.size() - pos, rng() % 777);
        parts.update(data.data() + pos, n);
        pos += n;
        if (round == 0) {
          // digest is non-destructive: reading midway changes nothing
          (void)parts.digest_raw();
        }
      }
      ASSERT_EQ(parts.digest_raw(), whole.digest_raw()) << checksum_name(a);
    }
  }
}

TEST(Checksum, CopyContinuesIndependently) {
  for (ChecksumAlgo a : kAllChecksumAlgos) {
    Checksummer c(a);
    c.update("hello ", 6);
    Checksummer copy = c;
    c.update("world", 5);
    copy.update("there", 5);
    EXPECT_EQ(hex_encode(c.digest_raw()), crc_hex(a, "hello world"));
    EXPECT_EQ(hex_encode(copy.digest_raw()), crc_hex(a, "hello there"));
    Checksummer moved = std::move(copy);
    EXPECT_EQ(hex_encode(moved.digest_raw()), crc_hex(a, "hello there"));
  }
}

// The PCLMULQDQ fold and the slicing-by-8 tables agree for every length around the fold
// thresholds, any alignment and any starting register.
TEST(Checksum, Crc64NvmeFastPathMatchesTables) {
  std::mt19937_64 rng(3);
  std::string data(70'000, '\0');
  for (auto& ch : data) ch = static_cast<char>(rng());
  for (std::size_t n = 0; n <= 700; ++n) {
    std::size_t off = rng() % 64;
    std::uint64_t reg = (n % 3 == 0) ? ~std::uint64_t{0} : rng();
    ASSERT_EQ(detail::crc64nvme_fast(reg, data.data() + off, n),
              detail::crc64nvme_table(reg, data.data() + off, n))
        << "n=" << n << " off=" << off;
  }
  for (std::size_t n : {4096u, 65536u, 65537u, 69'999u}) {
    ASSERT_EQ(detail::crc64nvme_fast(~0ull, data.data() + 1, n),
              detail::crc64nvme_table(~0ull, data.data() + 1, n));
  }
  std::string digits(1000, '\0');
  for (std::size_t i = 0; i < digits.size(); ++i) digits[i] = static_cast<char>('1' + i % 9);
  // "123456789" repeated: long enough to take the folding path.
  EXPECT_EQ(~detail::crc64nvme_fast(~0ull, digits.data(), 9), 0xAE8B14860A799888ull);
  EXPECT_EQ(detail::crc64nvme_fast(~0ull, digits.data(), digits.size()),
            detail::crc64nvme_table(~0ull, digits.data(), digits.size()));
  RecordProperty("crc64nvme_clmul", detail::crc64nvme_uses_clmul() ? "yes" : "no");
}

// RFC 4231 test case 2.
TEST(Checksum, HmacSha256) {
  EXPECT_EQ(hex_encode(hmac_sha256("Jefe", "what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  EXPECT_EQ(hmac_sha256("", "x").size(), 32u);
  // RFC 2202 test case 2.
  EXPECT_EQ(hex_encode(hmac_sha1("Jefe", "what do ya want for nothing?")),
            "effcdf6ae5eb2fa2d27416d5f184df9c259a7c79");
}

TEST(Checksum, Hex) {
  EXPECT_EQ(hex_encode(std::string("\x00\xff\x10", 3)), "00ff10");
  EXPECT_EQ(hex_decode("00FF10"), std::string("\x00\xff\x10", 3));
  EXPECT_FALSE(hex_decode("abc").has_value());
  EXPECT_FALSE(hex_decode("zz").has_value());
}

// RFC 4648 section 10 vectors.
TEST(Checksum, Base64) {
  const char* raw[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
  const char* enc[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
  const char* url[] = {"", "Zg", "Zm8", "Zm9v", "Zm9vYg", "Zm9vYmE", "Zm9vYmFy"};
  for (int i = 0; i < 7; ++i) {
    EXPECT_EQ(base64_encode(raw[i]), enc[i]);
    EXPECT_EQ(base64_decode(enc[i]), raw[i]);
    EXPECT_EQ(base64url_encode(raw[i]), url[i]);
    EXPECT_EQ(base64url_decode(url[i]), raw[i]);
  }
  std::string bytes("\xfb\xff\xfe", 3);
  EXPECT_EQ(base64_encode(bytes), "+//+");
  EXPECT_EQ(base64url_encode(bytes), "-__-");
  EXPECT_EQ(base64url_decode("-__-"), bytes);
}

TEST(Checksum, Base64IsStrict) {
  EXPECT_FALSE(base64_decode("Zg=").has_value());     // length
  EXPECT_FALSE(base64_decode("Zg").has_value());      // missing padding
  EXPECT_FALSE(base64_decode("Z===").has_value());    // too much padding
  EXPECT_FALSE(base64_decode("Zm=v").has_value());    // padding in the middle
  EXPECT_FALSE(base64_decode("Zh==").has_value());    // non-zero unused bits
  EXPECT_FALSE(base64_decode("Zm9v\n").has_value());  // whitespace
  EXPECT_FALSE(base64_decode("-__-").has_value());    // url alphabet
  EXPECT_FALSE(base64url_decode("Zg==").has_value());
  EXPECT_FALSE(base64url_decode("+//+").has_value());
  EXPECT_FALSE(base64url_decode("Z").has_value());
  EXPECT_FALSE(base64url_decode("Zh").has_value());
}

TEST(Checksum, CompositeChecksum) {
  auto raw = [](ChecksumAlgo a, std::string_view s) {
    Checksummer c(a);
    c.update(s.data(), s.size());
    return c.digest_raw();
  };
  // Expected values computed independently with Python hashlib/zlib.
  EXPECT_EQ(composite_checksum(ChecksumAlgo::sha256, {raw(ChecksumAlgo::sha256, "part1"),
                                                      raw(ChecksumAlgo::sha256, "part2")}),
            "xheoOGWlJSrr1KooTDWywen6ft/oubM2FCHlVKEDMfM=-2");
  EXPECT_EQ(composite_checksum(ChecksumAlgo::crc32, {raw(ChecksumAlgo::crc32, "part1"),
                                                     raw(ChecksumAlgo::crc32, "part2")}),
            "ZOITqw==-2");
}

TEST(Checksum, MultipartEtag) {
  EXPECT_EQ(
      multipart_etag({"ffc88b4ca90a355f8ddba6b2c3b2af5c", "d067a0fa9dc61a6e7195ca99696b5a89"}),
      "620e8b191a353bdc9189840bb3904928-2");
  EXPECT_EQ(
      multipart_etag({"\"FFC88B4CA90A355F8DDBA6B2C3B2AF5C\"", "d067a0fa9dc61a6e7195ca99696b5a89"}),
      "620e8b191a353bdc9189840bb3904928-2");
  EXPECT_FALSE(multipart_etag({}).has_value());
  EXPECT_FALSE(multipart_etag({"ffc88b4ca90a355f8ddba6b2c3b2af5"}).has_value());
  EXPECT_FALSE(multipart_etag({"gfc88b4ca90a355f8ddba6b2c3b2af5c"}).has_value());
  EXPECT_FALSE(multipart_etag({"620e8b191a353bdc9189840bb3904928-2"}).has_value());
}

TEST(Checksum, ConstantTimeEqual) {
  EXPECT_TRUE(constant_time_equal("", ""));
  EXPECT_TRUE(constant_time_equal("abc", "abc"));
  EXPECT_FALSE(constant_time_equal("abc", "abd"));
  EXPECT_FALSE(constant_time_equal("abc", "abcd"));
}

}  // namespace
}  // namespace objdirect
