#include "token/binding.hpp"

#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <random>

#include "token/binding_fuzz.hpp"

namespace objdirect::token {
namespace {

// HMAC-SHA256 straight from OpenSSL, independent of common/checksum.
std::string openssl_hmac(std::string_view key, std::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), out, &len);
  return std::string(reinterpret_cast<const char*>(out), len);
}

Challenge random_challenge(std::uint32_t seed) {
  std::mt19937 rng(seed);
  Challenge c;
  for (auto& b : c) b = static_cast<std::uint8_t>(rng());
  return c;
}

TEST(Challenge, TextRoundTripsAndDecodeIsStrict) {
  for (std::uint32_t seed = 0; seed < 50; ++seed) {
    Challenge c = random_challenge(seed);
    std::string text = encode_challenge(c);
    EXPECT_EQ(text.size(), 48u);
    EXPECT_EQ(text.substr(0, 5), "OD1C.");
    auto back = decode_challenge(text);
    ASSERT_TRUE(back.ok()) << back.status().to_string();
    EXPECT_EQ(*back, c);
  }
  std::string good = encode_challenge(random_challenge(1));
  EXPECT_FALSE(decode_challenge("").ok());
  EXPECT_FALSE(decode_challenge(good.substr(0, 47)).ok());
  EXPECT_FALSE(decode_challenge(good + "A").ok());
  EXPECT_FALSE(decode_challenge("OD1X." + good.substr(5)).ok());
  std::string pad = good;
  pad.back() = '=';
  EXPECT_FALSE(decode_challenge(pad).ok());
  // 43 characters carry 258 bits; the 2 unused ones must be zero (one text per challenge).
  const std::string alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string bits = good;
  bits.back() = alphabet[alphabet.find(good.back()) | 1];
  EXPECT_FALSE(decode_challenge(bits).ok());
}

TEST(BindProof, IsTheDocumentedHmacAndDependsOnEveryInput) {
  const Challenge c = random_challenge(7);
  const std::string endpoint("\x02\x00\x1f\x90\x7f\x00\x00\x01", 8);
  const Proof p = bind_proof("alice-secret", c, endpoint);
  const std::string key = openssl_hmac("alice-secret", "objdirect-rdma-bind-v1");
  const std::string want =
      openssl_hmac(key, std::string(reinterpret_cast<const char*>(c.data()), c.size()) + endpoint);
  ASSERT_EQ(want.size(), p.size());
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(p.data()), p.size()), want);
  EXPECT_TRUE(proof_equal(p, bind_proof("alice-secret", c, endpoint)));
  EXPECT_FALSE(proof_equal(p, bind_proof("mallory-secret", c, endpoint)));
  EXPECT_FALSE(proof_equal(p, bind_proof("alice-secret", random_challenge(8), endpoint)));
  EXPECT_FALSE(proof_equal(p, bind_proof("alice-secret", c, endpoint + "x")));
}

TEST(ServerChallenge, DependsOnKeyWindowEndpointAndPrincipal) {
  const Challenge a = server_challenge("server-key", 100, "ep-1", "alice");
  EXPECT_EQ(a, server_challenge("server-key", 100, "ep-1", "alice"));
  EXPECT_NE(a, server_challenge("other-key", 100, "ep-1", "alice"));
  EXPECT_NE(a, server_challenge("server-key", 101, "ep-1", "alice"));
  EXPECT_NE(a, server_challenge("server-key", 100, "ep-2", "alice"));
  EXPECT_NE(a, server_challenge("server-key", 100, "ep-1", "mallory"));
  // The key length is part of the message: moving a byte between key and principal changes it.
  EXPECT_NE(server_challenge("k", 1, "ab", "c"), server_challenge("k", 1, "a", "bc"));
}

TEST(BindingKey, SeparatesBackendProviderAndEndpoint) {
  Token t;
  t.backend = Backend::libfabric;
  t.provider = "tcp";
  t.endpoint = "E";
  Token u = t;
  u.provider = "shm";
  Token v = t;
  v.backend = Backend::ucx;
  Token w = t;
  w.endpoint = "F";
  EXPECT_NE(binding_key(t), binding_key(u));
  EXPECT_NE(binding_key(t), binding_key(v));
  EXPECT_NE(binding_key(t), binding_key(w));
  EXPECT_EQ(binding_key(t), binding_key(t));
}

Nonce nonce_of(int i) {
  Nonce n{};
  n[0] = static_cast<std::uint8_t>(i);
  n[9] = static_cast<std::uint8_t>(i >> 8);
  return n;
}

TEST(ReplayCache, AcceptsEachNonceOnceUntilItsExpiry) {
  ReplayCache cache(100, 180);
  const std::uint64_t now = 1'700'000'000;
  EXPECT_EQ(cache.admit(nonce_of(1), now + 60, now), ReplayCache::Result::accepted);
  EXPECT_EQ(cache.admit(nonce_of(1), now + 60, now), ReplayCache::Result::replayed);
  EXPECT_EQ(cache.admit(nonce_of(1), now + 60, now + 59), ReplayCache::Result::replayed);
  EXPECT_EQ(cache.admit(nonce_of(2), now + 60, now + 59), ReplayCache::Result::accepted);
  EXPECT_EQ(cache.size(), 2u);
  // At its expiry the token itself is refused by decode; the cache may forget it.
  EXPECT_EQ(cache.admit(nonce_of(3), now + 100, now + 60), ReplayCache::Result::accepted);
  EXPECT_EQ(cache.size(), 1u);
}

TEST(ReplayCache, NoncesMaxRefusesInsteadOfForgetting) {
  constexpr std::size_t max = 3;
  ReplayCache cache(max, 180);
  const std::uint64_t now = 1'700'000'000;
  for (int i = 0; i < static_cast<int>(max); ++i) {
    EXPECT_EQ(cache.admit(nonce_of(i), now + 10, now), ReplayCache::Result::accepted);
  }
  EXPECT_EQ(cache.admit(nonce_of(50), now + 10, now), ReplayCache::Result::full);
  // Full is no amnesty: the remembered nonces are still refused.
  EXPECT_EQ(cache.admit(nonce_of(0), now + 10, now + 5), ReplayCache::Result::replayed);
  EXPECT_EQ(cache.size(), max);
  // Once they expire there is room again.
  EXPECT_EQ(cache.admit(nonce_of(50), now + 20, now + 10), ReplayCache::Result::accepted);
  EXPECT_EQ(cache.size(), 1u);
}

TEST(ReplayCache, ALongPauseForgetsEverythingExpired) {
  ReplayCache cache(10, 5);
  const std::uint64_t now = 1'700'000'000;
  for (int i = 0; i < 5; ++i) cache.admit(nonce_of(i), now + 1 + i, now);
  EXPECT_EQ(cache.size(), 5u);
  EXPECT_EQ(cache.admit(nonce_of(9), now + 1003, now + 1000), ReplayCache::Result::accepted);
  EXPECT_EQ(cache.size(), 1u);
}

TEST(BindingTable, LruEvictionAtBindingsMaxExpiryAndTeardown) {
  using namespace std::chrono_literals;
  BindingTable table(2, 60s);
  BindingTable::Clock::time_point t0{};
  table.bind("e1", "alice", t0);
  table.bind("e2", "bob", t0);
  EXPECT_EQ(table.find("e1", "alice", t0 + 1s), BindingTable::State::bound);  // e1 most recent
  table.bind("e3", "carol", t0 + 2s);  // evicts e2, the least recently used
  EXPECT_EQ(table.size(), 2u);
  EXPECT_EQ(table.evictions(), 1u);
  EXPECT_EQ(table.find("e2", "bob", t0 + 3s), BindingTable::State::unbound);
  EXPECT_EQ(table.find("e1", "mallory", t0 + 3s), BindingTable::State::other_principal);
  EXPECT_EQ(table.find("e1", "alice", t0 + 60s), BindingTable::State::unbound);  // expired
  EXPECT_EQ(table.size(), 1u);
  table.drop("e3");
  EXPECT_EQ(table.find("e3", "carol", t0 + 4s), BindingTable::State::unbound);
  EXPECT_EQ(table.size(), 0u);
}

TEST(BindingFuzz, BodyHoldsOnSeeds) {
  std::mt19937 rng(5);
  for (int round = 0; round < 300; ++round) {
    std::vector<std::uint8_t> bytes(rng() % 400);
    for (auto& b : bytes) b = static_cast<std::uint8_t>(rng());
    ASSERT_TRUE(binding_fuzz_one(bytes.data(), bytes.size())) << "round " << round;
  }
  std::string text = encode_challenge(random_challenge(3));
  EXPECT_TRUE(binding_fuzz_one(reinterpret_cast<const std::uint8_t*>(text.data()), text.size()));
}

}  // namespace
}  // namespace objdirect::token
