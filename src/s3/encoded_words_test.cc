#include "s3/encoded_words.hpp"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "s3/mutate_test_util.hpp"

namespace objdirect::s3 {
bool encoded_words_fuzz_one(const std::uint8_t* data, std::size_t size);  // encoded_words_fuzz.cc
namespace {

TEST(EncodedWords, PlainAsciiIsUnchanged) {
  EXPECT_EQ(encode_metadata_value("hello world-1.2_x"), "hello world-1.2_x");
  EXPECT_EQ(encode_metadata_value(""), "");
  EXPECT_EQ(decode_metadata_value("hello"), "hello");
}

TEST(EncodedWords, NonAsciiGoesOutAsOneQWord) {
  // "café au lait" in UTF-8, as S3 returns it.
  EXPECT_EQ(encode_metadata_value("caf\xC3\xA9 au lait"), "=?UTF-8?Q?caf=C3=A9_au_lait?=");
  // '=', '?', '_' and control bytes are escaped; a plain value holding "=?" is encoded too, so
  // that decoding it gives it back.
  EXPECT_EQ(encode_metadata_value("a=?b_\t"), "=?UTF-8?Q?a=3D=3Fb=5F=09?=");
  EXPECT_EQ(decode_metadata_value(encode_metadata_value("a=?b_\t")), "a=?b_\t");
}

TEST(EncodedWords, DecodesQAndBWordsAndAdjacentWords) {
  EXPECT_EQ(decode_metadata_value("=?UTF-8?Q?caf=C3=A9_au_lait?="), "caf\xC3\xA9 au lait");
  EXPECT_EQ(decode_metadata_value("=?utf-8?q?caf=c3=a9?="), "caf\xC3\xA9");
  EXPECT_EQ(decode_metadata_value("=?UTF-8?B?Y2Fmw6k=?="), "caf\xC3\xA9");
  EXPECT_EQ(decode_metadata_value("=?US-ASCII?Q?abc?="), "abc");
  // Whitespace between two words is dropped (RFC 2047 section 6.2).
  EXPECT_EQ(decode_metadata_value("=?UTF-8?Q?ab?= \t=?UTF-8?B?Y2Q=?="), "abcd");
}

TEST(EncodedWords, AnythingElseIsKeptAsSent) {
  for (std::string v :
       {"=?", "=?UTF-8?Q?abc", "=?UTF-8?X?abc?=", "=?KOI8-R?Q?abc?=", "=?UTF-8?Q?a b?=",
        "=?UTF-8?Q?=C3?=", "=?UTF-8?Q?=ZZ?=", "x =?UTF-8?Q?a?=", "=?UTF-8?Q?a?= tail",
        "=?UTF-8?B?!!!?=", "=?UTF-8?Q?=00?=", "=?UTF-8?Q?=FF?="}) {
    EXPECT_EQ(decode_metadata_value(v), v) << v;
  }
  // Longer than the limit: not looked at.
  std::string big = "=?UTF-8?Q?" + std::string(encoded_words_bytes_max, 'a') + "?=";
  EXPECT_EQ(decode_metadata_value(big), big);
  std::string edge = "=?UTF-8?Q?" + std::string(encoded_words_bytes_max - 12, 'a') + "?=";
  ASSERT_EQ(edge.size(), encoded_words_bytes_max);
  EXPECT_EQ(decode_metadata_value(edge), std::string(encoded_words_bytes_max - 12, 'a'));
}

TEST(EncodedWords, RoundTripsEveryUtf8Value) {
  const std::vector<std::string> values = {"\xE2\x82\xAC 5", "\xF0\x9F\x98\x80",
                                           "tab\there",      "=?UTF-8?Q?x?=",
                                           "a_b c",          "\xC3\xBC\xC3\xB6"};
  for (const auto& v : values) {
    EXPECT_EQ(decode_metadata_value(encode_metadata_value(v)), v) << v;
  }
}

// Replays the fuzz target's invariants over seeds and deterministic mutations of them.
TEST(EncodedWordsFuzz, ReplayInvariants) {
  const std::vector<std::string> seeds = {"plain",
                                          "caf\xC3\xA9",
                                          "=?UTF-8?Q?caf=C3=A9_x?=",
                                          "=?UTF-8?B?Y2Fmw6k=?= =?utf-8?q?a?=",
                                          "=?us-ascii?Q?=3D?=",
                                          "\x01\x7F\xFF",
                                          "a=?b"};
  std::mt19937_64 rng(20261201);
  const std::string alphabet =
      "=?QBqbUTF-8_ \t\xC3\xA9"
      "0123456789ABCDEFaz\x80";
  int checked = 0;
  for (const auto& seed : seeds) {
    ASSERT_TRUE(
        encoded_words_fuzz_one(reinterpret_cast<const std::uint8_t*>(seed.data()), seed.size()))
        << testing::PrintToString(seed);
    for (int m = 0; m < 400; ++m) {
      const std::string in = testing_util::mutate(seed, alphabet, rng);
      ASSERT_TRUE(
          encoded_words_fuzz_one(reinterpret_cast<const std::uint8_t*>(in.data()), in.size()))
          << testing::PrintToString(in);
      ++checked;
    }
  }
  EXPECT_EQ(checked, 7 * 400);
}

}  // namespace
}  // namespace objdirect::s3
