#include "s3/range.hpp"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace objdirect::s3 {
namespace {

// The parsed range, failing the test on an error or an ignored header.
ByteRange must_parse(std::string_view h, std::uint64_t size) {
  auto r = parse_range(h, size);
  EXPECT_TRUE(r.ok()) << h << ": " << r.status().to_string();
  if (!r.ok()) return {};
  EXPECT_TRUE(r->has_value()) << h << " was ignored";
  return r->value_or(ByteRange{});
}

bool ignored(std::string_view h, std::uint64_t size) {
  auto r = parse_range(h, size);
  return r.ok() && !r->has_value();
}

bool unsatisfiable(std::string_view h, std::uint64_t size) {
  return parse_range(h, size).code() == Errc::invalid_range;
}

TEST(S3Range, FirstByte) {
  EXPECT_EQ(must_parse("bytes=0-0", 1), (ByteRange{0, 0}));
  EXPECT_EQ(must_parse("bytes=0-0", 1000), (ByteRange{0, 0}));
  EXPECT_EQ(must_parse("bytes=0-0", 1000).length(), 1u);
}

TEST(S3Range, ClosedRanges) {
  EXPECT_EQ(must_parse("bytes=0-999", 1000), (ByteRange{0, 999}));
  EXPECT_EQ(must_parse("bytes=10-19", 1000), (ByteRange{10, 19}));
  EXPECT_EQ(must_parse("bytes=10-19", 1000).length(), 10u);
  EXPECT_EQ(must_parse("bytes=999-999", 1000), (ByteRange{999, 999}));
  EXPECT_EQ(must_parse("bytes=5-5", 6), (ByteRange{5, 5}));
}

TEST(S3Range, LastIsClampedToSize) {
  EXPECT_EQ(must_parse("bytes=0-1000", 1000), (ByteRange{0, 999}));
  EXPECT_EQ(must_parse("bytes=500-100000", 1000), (ByteRange{500, 999}));
  EXPECT_EQ(must_parse("bytes=0-18446744073709551615", 1000), (ByteRange{0, 999}));
  EXPECT_EQ(must_parse("bytes=0-99999999999999999999999999", 1000), (ByteRange{0, 999}));
}

TEST(S3Range, OpenEnded) {
  EXPECT_EQ(must_parse("bytes=0-", 1000), (ByteRange{0, 999}));
  EXPECT_EQ(must_parse("bytes=999-", 1000), (ByteRange{999, 999}));
  EXPECT_EQ(must_parse("bytes=0-", 1), (ByteRange{0, 0}));
}

TEST(S3Range, Suffix) {
  EXPECT_EQ(must_parse("bytes=-1", 1000), (ByteRange{999, 999}));
  EXPECT_EQ(must_parse("bytes=-100", 1000), (ByteRange{900, 999}));
  EXPECT_EQ(must_parse("bytes=-1000", 1000), (ByteRange{0, 999}));
  EXPECT_EQ(must_parse("bytes=-5000", 1000), (ByteRange{0, 999}));
  EXPECT_EQ(must_parse("bytes=-99999999999999999999", 1000), (ByteRange{0, 999}));
  EXPECT_EQ(must_parse("bytes=-1", 1), (ByteRange{0, 0}));
}

TEST(S3Range, Unsatisfiable) {
  EXPECT_TRUE(unsatisfiable("bytes=-0", 1000));
  EXPECT_TRUE(unsatisfiable("bytes=1000-", 1000));
  EXPECT_TRUE(unsatisfiable("bytes=1000-2000", 1000));
  EXPECT_TRUE(unsatisfiable("bytes=1-1", 1));
  EXPECT_TRUE(unsatisfiable("bytes=99999999999999999999-", 1000));
  EXPECT_TRUE(unsatisfiable("bytes=18446744073709551615-", 1000));
  EXPECT_TRUE(unsatisfiable("bytes=18446744073709551615-18446744073709551615", 1000));
  // An empty object satisfies no range.
  EXPECT_TRUE(unsatisfiable("bytes=0-0", 0));
  EXPECT_TRUE(unsatisfiable("bytes=0-", 0));
  EXPECT_TRUE(unsatisfiable("bytes=-1", 0));
  EXPECT_TRUE(unsatisfiable("bytes=-0", 0));
  EXPECT_FALSE(parse_range("bytes=-0", 1).status().message().empty());
}

TEST(S3Range, IgnoredHeaders) {
  for (const char* h : {"",
                        "bytes",
                        "bytes=",
                        "bytes=-",
                        "bytes=5-2",
                        "bytes=1-0",
                        "bytes=a-b",
                        "bytes=0-a",
                        "bytes=a-",
                        "bytes=-a",
                        "bytes=0-1,3-4",
                        "bytes=0-1,",
                        "bytes=,0-1",
                        "items=0-1",
                        "bits=0-1",
                        "0-1",
                        "bytes 0-1",
                        "bytes=+0-1",
                        "bytes=0--1",
                        "bytes=--1",
                        "bytes=0x10-0x20",
                        "bytes=1 - 2",
                        "bytes=1-2-3",
                        "bytes=0-1;x",
                        "bytes=\xff-1",
                        "garbage",
                        "=0-1",
                        "bytes==0-1"}) {
    EXPECT_TRUE(ignored(h, 1000)) << h;
  }
  // Ignored even on an empty object: the whole (empty) object is served.
  EXPECT_TRUE(ignored("bytes=0-1,3-4", 0));
  EXPECT_TRUE(ignored("bytes=5-2", 0));
}

TEST(S3Range, WhitespaceAndCase) {
  EXPECT_EQ(must_parse(" bytes=1-2 ", 10), (ByteRange{1, 2}));
  EXPECT_EQ(must_parse("bytes= 1-2", 10), (ByteRange{1, 2}));
  EXPECT_EQ(must_parse("bytes =1-2", 10), (ByteRange{1, 2}));
  EXPECT_EQ(must_parse("Bytes=1-2", 10), (ByteRange{1, 2}));
  EXPECT_EQ(must_parse("BYTES=1-2", 10), (ByteRange{1, 2}));
  EXPECT_EQ(must_parse("\tbytes=1-2\t", 10), (ByteRange{1, 2}));
}

TEST(S3Range, LeadingZeros) {
  EXPECT_EQ(must_parse("bytes=0010-0019", 1000), (ByteRange{10, 19}));
  EXPECT_EQ(must_parse("bytes=-0001", 1000), (ByteRange{999, 999}));
}

TEST(S3Range, HugeObjects) {
  const std::uint64_t five_tib = 5ull << 40;
  EXPECT_EQ(must_parse("bytes=5497558138879-", five_tib), (ByteRange{five_tib - 1, five_tib - 1}));
  EXPECT_EQ(must_parse("bytes=-1", five_tib), (ByteRange{five_tib - 1, five_tib - 1}));
  const std::uint64_t max = ~0ull;
  EXPECT_EQ(must_parse("bytes=0-", max), (ByteRange{0, max - 1}));
  EXPECT_EQ(must_parse("bytes=-18446744073709551615", max), (ByteRange{0, max - 1}));
}

TEST(S3CopySourceRange, Strict) {
  auto ok = [](std::string_view h, std::uint64_t size) {
    auto r = parse_copy_source_range(h, size);
    EXPECT_TRUE(r.ok()) << h << ": " << r.status().to_string();
    return r.ok() ? *r : ByteRange{};
  };
  EXPECT_EQ(ok("bytes=0-0", 1), (ByteRange{0, 0}));
  EXPECT_EQ(ok("bytes=0-999", 1000), (ByteRange{0, 999}));
  EXPECT_EQ(ok("bytes=5242880-10485759", 10485760), (ByteRange{5242880, 10485759}));
  EXPECT_EQ(ok(" bytes=1-2 ", 10), (ByteRange{1, 2}));
  for (const char* bad :
       {"", "bytes=", "bytes=-5", "bytes=5-", "bytes=5-2", "bytes=a-b", "bytes=0-1,2-3",
        "Bytes=0-1", "bytes = 0-1", "bytes=0 -1", "items=0-1", "0-1", "bytes=-", "bytes=+0-1"}) {
    const auto r = parse_copy_source_range(bad, 1000);
    EXPECT_EQ(r.code(), Errc::invalid_argument) << bad;
    EXPECT_FALSE(r.status().message().empty());
  }
  EXPECT_EQ(parse_copy_source_range("bytes=0-1000", 1000).code(), Errc::invalid_request);
  EXPECT_EQ(parse_copy_source_range("bytes=1000-1000", 1000).code(), Errc::invalid_request);
  EXPECT_EQ(parse_copy_source_range("bytes=0-0", 0).code(), Errc::invalid_request);
  EXPECT_EQ(parse_copy_source_range("bytes=0-99999999999999999999", 1000).code(),
            Errc::invalid_request);
}

TEST(S3ContentRange, Formats) {
  EXPECT_EQ(content_range(ByteRange{0, 0}, 1234), "bytes 0-0/1234");
  EXPECT_EQ(content_range(ByteRange{900, 999}, 1000), "bytes 900-999/1000");
  EXPECT_EQ(content_range(ByteRange{0, 18446744073709551614ull}, 18446744073709551615ull),
            "bytes 0-18446744073709551614/18446744073709551615");
  EXPECT_EQ(content_range_unsatisfied(1000), "bytes */1000");
  EXPECT_EQ(content_range_unsatisfied(0), "bytes */0");
}

TEST(S3ContentRange, RoundTripThroughParse) {
  const ByteRange r = must_parse("bytes=-10", 25);
  EXPECT_EQ(content_range(r, 25), "bytes 15-24/25");
  EXPECT_EQ(r.length(), 10u);
}

}  // namespace
}  // namespace objdirect::s3

namespace objdirect::s3 {
bool range_fuzz_one(const std::uint8_t* data, std::size_t size);  // range_fuzz.cc
namespace {

std::string with_size(std::uint64_t size, std::string_view header) {
  std::string in(8, '\0');
  for (int i = 0; i < 8; ++i) in[i] = static_cast<char>(size >> (8 * i));
  return in + std::string(header);
}

// Replays the fuzz target's invariants over seeds and deterministic random mutations of them, so
// that the ordinary build checks what the fuzzer checks.
TEST(S3RangeFuzz, ReplayInvariants) {
  const std::vector<std::string> seeds = {
      "bytes=0-0", "bytes=-1",      "bytes=5-",     "bytes=0-99999999999999999999",
      "bytes=-0",  "bytes=1-2,3-4", "Bytes = 7-9 ", "bytes=18446744073709551615-"};
  std::mt19937_64 rng(20261129);
  const std::string alphabet = "bytes=-,0123456789 \tB";
  int checked = 0;
  for (const std::string& seed : seeds) {
    for (std::uint64_t size : {0ull, 1ull, 10ull, 1000ull, 0x4000000000000005ull, ~0ull}) {
      std::string in = with_size(size, seed);
      ASSERT_TRUE(range_fuzz_one(reinterpret_cast<const std::uint8_t*>(in.data()), in.size()))
          << seed << " size " << size;
      for (int m = 0; m < 300; ++m) {
        std::string h = seed;
        const int edits = 1 + static_cast<int>(rng() % 3);
        for (int e = 0; e < edits; ++e) {
          const std::size_t pos = h.empty() ? 0 : rng() % h.size();
          const char ch = alphabet[rng() % alphabet.size()];
          switch (rng() % 3) {
            case 0:
              if (!h.empty()) h[pos] = ch;
              break;
            case 1:
              h.insert(h.begin() + static_cast<std::ptrdiff_t>(pos), ch);
              break;
            default:
              if (!h.empty()) h.erase(pos, 1);
          }
        }
        in = with_size(size, h);
        ASSERT_TRUE(range_fuzz_one(reinterpret_cast<const std::uint8_t*>(in.data()), in.size()))
            << testing::PrintToString(h) << " size " << size;
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, 8 * 6 * 300);
}

}  // namespace
}  // namespace objdirect::s3
