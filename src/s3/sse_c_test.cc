#include "s3/sse_c.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "common/checksum.hpp"
#include "s3/mutate_test_util.hpp"

namespace objdirect::s3 {
bool sse_c_fuzz_one(const std::uint8_t* data, std::size_t size);  // sse_c_fuzz.cc
namespace {

std::string unhex(std::string_view h) {
  auto r = hex_decode(h);
  EXPECT_TRUE(r.has_value()) << h;
  return r.value_or("");
}

std::string crypt(AesCtr& c, std::uint64_t offset, std::string_view in) {
  std::string out(in.size(), '\0');
  c.seek(offset);
  c.apply(reinterpret_cast<const std::byte*>(in.data()), reinterpret_cast<std::byte*>(out.data()),
          in.size());
  return out;
}

// NIST SP 800-38A, F.5.5 CTR-AES256.Encrypt: four blocks from the counter f0f1...feff, whose
// second block carries into the next byte (...fdff00).
TEST(AesCtr, NistSp800_38aVector) {
  const std::string key = unhex("603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4");
  const std::string iv = unhex("f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff");
  const std::string plain = unhex(
      "6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e51"
      "30c81c46a35ce411e5fbc1191a0a52eff69f2445df4f9b17ad2b417be66c3710");
  const std::string cipher = unhex(
      "601ec313775789a5b7a7f504bbf3d228f443e3ca4d62b59aca84e990cacaf5c5"
      "2b0930daa23de94ce87017ba2d84988ddfc9c58db67aada613c2dd08457941a6");
  AesCtr c(key, iv);
  EXPECT_EQ(hex_encode(crypt(c, 0, plain)), hex_encode(cipher));
  EXPECT_EQ(crypt(c, 0, cipher), plain);  // CTR decrypts by encrypting again
  // Block 3 alone, and a range that starts inside block 2.
  EXPECT_EQ(crypt(c, 32, plain.substr(32, 16)), cipher.substr(32, 16));
  EXPECT_EQ(crypt(c, 21, plain.substr(21, 30)), cipher.substr(21, 30));
}

// Any range decrypted from its own offset equals the same slice of the whole stream, including
// counters that carry across all 128 bits (an IV of all 0xff).
TEST(AesCtr, SeekEqualsSliceOfWholeStream) {
  std::mt19937 rng(20);
  std::string key(32, '\0'), plain(70000, '\0');
  for (auto& ch : key) ch = static_cast<char>(rng());
  for (auto& ch : plain) ch = static_cast<char>(rng());
  for (const std::string& iv : {std::string(16, '\xff'), std::string(16, '\0'),
                                unhex("0000000000000000fffffffffffffff0")}) {
    AesCtr c(key, iv);
    const std::string whole = crypt(c, 0, plain);
    ASSERT_NE(whole.substr(0, 64), plain.substr(0, 64));
    for (int i = 0; i < 200; ++i) {
      const std::size_t off = rng() % plain.size();
      const std::size_t len = rng() % (plain.size() - off + 1);
      ASSERT_EQ(crypt(c, off, plain.substr(off, len)), whole.substr(off, len))
          << "offset " << off << " length " << len;
    }
    // Streaming in uneven pieces after one seek equals the whole.
    std::string pieces(plain.size(), '\0');
    c.seek(0);
    for (std::size_t pos = 0; pos < plain.size();) {
      const std::size_t n = std::min<std::size_t>(plain.size() - pos, 1 + rng() % 5000);
      c.apply(reinterpret_cast<const std::byte*>(plain.data() + pos),
              reinterpret_cast<std::byte*>(pieces.data() + pos), n);
      pos += n;
    }
    EXPECT_EQ(pieces, whole);
    // In place.
    std::string inplace = plain;
    c.seek(0);
    c.apply(reinterpret_cast<const std::byte*>(inplace.data()),
            reinterpret_cast<std::byte*>(inplace.data()), inplace.size());
    EXPECT_EQ(inplace, whole);
  }
}

SseCHeaders headers_for(std::string_view raw) {
  Md5 md5;
  md5.update(raw.data(), raw.size());
  return {"AES256", base64_encode(raw), base64_encode(md5.raw())};
}

TEST(CustomerKey, ParsesAndRejectsAsAws) {
  const std::string raw(32, 'k');
  auto k = CustomerKey::parse(headers_for(raw));
  ASSERT_TRUE(k.ok()) << k.status().message();
  EXPECT_EQ(k->raw(), raw);
  EXPECT_EQ(k->key_md5(), headers_for(raw).key_md5);

  auto expect_invalid = [](SseCHeaders h, std::string_view msg) {
    auto r = CustomerKey::parse(h);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.code(), Errc::invalid_argument);
    EXPECT_NE(r.status().message().find(msg), std::string::npos) << r.status().message();
  };
  SseCHeaders h = headers_for(raw);
  h.algorithm = "aws:kms";
  expect_invalid(h, "must provide a valid encryption algorithm");
  h = headers_for(raw);
  h.algorithm.reset();
  expect_invalid(h, "must provide a valid encryption algorithm");
  h = headers_for(raw);
  h.key.reset();
  expect_invalid(h, "must provide an appropriate secret key");
  h = headers_for(raw);
  h.key = base64_encode(std::string(16, 'k'));  // AES-128 sized
  expect_invalid(h, "The secret key was invalid for the specified algorithm.");
  h.key = "not base64!";
  expect_invalid(h, "The secret key was invalid for the specified algorithm.");
  h = headers_for(raw);
  h.key_md5.reset();
  expect_invalid(h, "must provide the client calculated MD5 of the secret key");
  h = headers_for(raw);
  h.key_md5 = headers_for(std::string(32, 'x')).key_md5;
  expect_invalid(h, "The calculated MD5 hash of the key did not match the hash that was provided.");
  h.key_md5 = "garbage";
  expect_invalid(h, "The calculated MD5 hash of the key did not match the hash that was provided.");
}

TEST(CustomerKey, VerifierRecognisesOnlyItsKey) {
  const CustomerKey a = CustomerKey::from_raw(std::string(32, 'a'));
  const CustomerKey b = CustomerKey::from_raw(std::string(32, 'b'));
  const std::string salt = random_bytes(sse_c_salt_bytes);
  const std::string v = key_verifier(salt, a);
  EXPECT_EQ(v.size(), 32u);
  EXPECT_NE(v, a.raw());
  EXPECT_TRUE(key_matches(salt, v, a));
  EXPECT_FALSE(key_matches(salt, v, b));
  EXPECT_FALSE(key_matches(salt, v.substr(0, 31), a));
  // Another salt, another verifier for the same key.
  const std::string salt2 = random_bytes(sse_c_salt_bytes);
  EXPECT_NE(salt, salt2);
  EXPECT_NE(key_verifier(salt2, a), v);
  EXPECT_FALSE(key_matches(salt2, v, a));
  EXPECT_EQ(random_iv().size(), 16u);
  EXPECT_NE(random_iv(), random_iv());
}

TEST(CustomerKey, EtagIsKeyedNotThePlaintextMd5) {
  const CustomerKey a = CustomerKey::from_raw(std::string(32, 'a'));
  const CustomerKey b = CustomerKey::from_raw(std::string(32, 'b'));
  Md5 md5;
  md5.update("hello", 5);
  const std::string e = sse_c_etag(a, md5.raw());
  EXPECT_EQ(e.size(), 32u);
  EXPECT_NE(e, md5.hex());
  EXPECT_EQ(e, sse_c_etag(a, md5.raw()));
  EXPECT_NE(e, sse_c_etag(b, md5.raw()));
}

// Round trip: the headers a client sends for a key (base64 of the 32 bytes, base64 of their MD5)
// parse back to exactly that key, for keys of every byte value; the MD5 echoed is the one sent.
TEST(CustomerKey, HeadersRoundTripForRandomKeys) {
  std::mt19937_64 rng(32);
  for (int i = 0; i < 500; ++i) {
    std::string raw(sse_c_key_bytes, '\0');
    for (auto& ch : raw) ch = static_cast<char>(rng());
    if (i == 0) raw.assign(sse_c_key_bytes, '\0');
    if (i == 1) raw.assign(sse_c_key_bytes, '\xff');
    const SseCHeaders h = headers_for(raw);
    auto k = CustomerKey::parse(h);
    ASSERT_TRUE(k.ok()) << k.status().message();
    EXPECT_EQ(k->raw(), raw);
    EXPECT_EQ(k->key_md5(), *h.key_md5);
    EXPECT_EQ(CustomerKey::from_raw(raw).key_md5(), *h.key_md5);
    EXPECT_EQ(base64_encode(k->raw()), *h.key);
  }
}

std::vector<std::string> load_corpus() {
  std::vector<std::string> seeds;
  for (const auto& e : std::filesystem::directory_iterator(OBJDIRECT_SSE_C_CORPUS_DIR)) {
    std::ifstream in(e.path(), std::ios::binary);
    seeds.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  return seeds;
}

// The fuzz target's invariants on the checked-in seeds and 300 mutations of each.
TEST(CustomerKeyFuzz, ReplayInvariants) {
  const auto seeds = load_corpus();
  ASSERT_GE(seeds.size(), 13u);
  static const char chars[] = "AES256aeskmsABCDEFabcdef0123456789+/=\n \t!\x00\x01\x03\x07\xff";
  const std::string alphabet(chars, sizeof(chars) - 1);
  std::mt19937_64 rng(33);
  int accepted_seeds = 0;
  for (const std::string& seed : seeds) {
    ASSERT_TRUE(sse_c_fuzz_one(reinterpret_cast<const std::uint8_t*>(seed.data()), seed.size()))
        << testing::PrintToString(seed);
    std::string rest = seed.substr(1);
    SseCHeaders h;
    std::optional<std::string>* f[] = {&h.algorithm, &h.key, &h.key_md5};
    for (unsigned i = 0; i < 3; ++i) {
      const auto nl = rest.find('\n');
      if (seed[0] & (1 << i)) *f[i] = rest.substr(0, nl);
      rest = nl == std::string::npos ? "" : rest.substr(nl + 1);
    }
    accepted_seeds += CustomerKey::parse(h).ok() ? 1 : 0;
    for (int m = 0; m < 300; ++m) {
      std::string s = testing_util::mutate(seed, alphabet, rng);
      ASSERT_TRUE(sse_c_fuzz_one(reinterpret_cast<const std::uint8_t*>(s.data()), s.size()))
          << testing::PrintToString(s);
    }
  }
  EXPECT_EQ(accepted_seeds, 2) << "the corpus has two valid keys (ok-*), the rest are refusals";
}

}  // namespace
}  // namespace objdirect::s3
