#include "s3/conditional.hpp"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace objdirect::s3 {
namespace {

constexpr std::int64_t kT = 784111777;  // Sun, 06 Nov 1994 08:49:37 GMT
constexpr const char* kAt = "Sun, 06 Nov 1994 08:49:37 GMT";
constexpr const char* kBefore = "Sun, 06 Nov 1994 08:49:36 GMT";
constexpr const char* kAfter = "Sun, 06 Nov 1994 08:49:38 GMT";
constexpr std::int64_t kMtimeNs = kT * 1'000'000'000 + 500'000'000;  // 08:49:37.5
constexpr const char* kEtag = "d41d8cd98f00b204e9800998ecf8427e";

Errc eval(const Conditions& c) {
  return evaluate_read(c, kEtag, kMtimeNs).code();
}

Conditions im(std::string v) {
  Conditions c;
  c.if_match = std::move(v);
  return c;
}
Conditions inm(std::string v) {
  Conditions c;
  c.if_none_match = std::move(v);
  return c;
}

// Dates go through common/time.hpp's parse_http_date; these pin that all three HTTP-date forms
// work as conditions and that junk is ignored rather than failing the request.
TEST(S3Conditional, AllThreeDateFormats) {
  for (const char* at : {"Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT",
                         "Sun Nov  6 08:49:37 1994"}) {
    Conditions c;
    c.if_modified_since = at;
    EXPECT_EQ(eval(c), Errc::not_modified) << at;
    c = {};
    c.if_unmodified_since = at;
    EXPECT_EQ(eval(c), Errc::ok) << at;
  }
  for (const char* before : {"Sun, 06 Nov 1994 08:49:36 GMT", "Sunday, 06-Nov-94 08:49:36 GMT",
                             "Sun Nov  6 08:49:36 1994"}) {
    Conditions c;
    c.if_modified_since = before;
    EXPECT_EQ(eval(c), Errc::ok) << before;
    c = {};
    c.if_unmodified_since = before;
    EXPECT_EQ(eval(c), Errc::precondition_failed) << before;
  }
}

TEST(S3Conditional, UnparsableDatesAreIgnored) {
  for (const char* junk :
       {"yesterday", "GMT", "1994-11-06T08:49:36Z", "784111776", "Sun, 31 Nov 1994 08:49:36 GMT",
        "Sun, 06 Nov 1994 25:49:36 GMT", "Sun, 06 Nov 1994 08:49:36"}) {
    Conditions c;
    c.if_unmodified_since = junk;  // a parsed date here would fail with 412
    c.if_modified_since = "Sun, 06 Nov 2094 08:49:37 GMT";  // would be 304 if consulted
    EXPECT_EQ(eval(c), Errc::not_modified) << junk;
    c.if_modified_since = junk;
    EXPECT_EQ(eval(c), Errc::ok) << junk;
  }
}

TEST(S3Conditional, NoConditions) {
  EXPECT_EQ(eval({}), Errc::ok);
}

TEST(S3Conditional, IfMatch) {
  EXPECT_EQ(eval(im("\"d41d8cd98f00b204e9800998ecf8427e\"")), Errc::ok);
  EXPECT_EQ(eval(im("d41d8cd98f00b204e9800998ecf8427e")), Errc::ok);  // bare, as S3 accepts
  EXPECT_EQ(eval(im("*")), Errc::ok);
  EXPECT_EQ(eval(im(" * ")), Errc::ok);
  EXPECT_EQ(eval(im("\"other\"")), Errc::precondition_failed);
  EXPECT_EQ(eval(im("\"other\", \"d41d8cd98f00b204e9800998ecf8427e\"")), Errc::ok);
  EXPECT_EQ(eval(im("\"a\",\"b\",\"c\"")), Errc::precondition_failed);
  EXPECT_EQ(eval(im("\"d41d8cd98f00b204e9800998ecf8427\"")), Errc::precondition_failed);
  EXPECT_EQ(eval(im("\"D41D8CD98F00B204E9800998ECF8427E\"")), Errc::precondition_failed);
  // Strong comparison: a weak tag never satisfies If-Match.
  EXPECT_EQ(eval(im("W/\"d41d8cd98f00b204e9800998ecf8427e\"")), Errc::precondition_failed);
  // Malformed: nothing after the broken element matches.
  EXPECT_EQ(eval(im("\"d41d8cd98f00b204e9800998ecf8427e")), Errc::precondition_failed);
  EXPECT_EQ(eval(im("*abc")), Errc::precondition_failed);
  EXPECT_EQ(eval(im("\"x\"junk, \"d41d8cd98f00b204e9800998ecf8427e\"")), Errc::precondition_failed);
  // Empty counts as absent.
  EXPECT_EQ(eval(im("")), Errc::ok);
  EXPECT_EQ(eval(im("  ")), Errc::ok);
}

TEST(S3Conditional, IfMatchMessageIsNotEmpty) {
  const Status st = evaluate_read(im("\"x\""), kEtag, kMtimeNs);
  EXPECT_EQ(http_status(st.code()), 412);
  EXPECT_FALSE(st.message().empty());
}

TEST(S3Conditional, IfNoneMatch) {
  EXPECT_EQ(eval(inm("\"d41d8cd98f00b204e9800998ecf8427e\"")), Errc::not_modified);
  EXPECT_EQ(eval(inm("d41d8cd98f00b204e9800998ecf8427e")), Errc::not_modified);
  // Weak comparison: W/ is ignored.
  EXPECT_EQ(eval(inm("W/\"d41d8cd98f00b204e9800998ecf8427e\"")), Errc::not_modified);
  EXPECT_EQ(eval(inm("*")), Errc::not_modified);
  EXPECT_EQ(eval(inm("\"a\", W/\"d41d8cd98f00b204e9800998ecf8427e\"")), Errc::not_modified);
  EXPECT_EQ(eval(inm("\"other\"")), Errc::ok);
  EXPECT_EQ(eval(inm("\"a\", \"b\"")), Errc::ok);
  EXPECT_EQ(eval(inm("\"unterminated")), Errc::ok);
  EXPECT_EQ(eval(inm("")), Errc::ok);
}

TEST(S3Conditional, EtagArgumentMayBeQuoted) {
  EXPECT_TRUE(evaluate_read(im("\"abc\""), "\"abc\"", kMtimeNs).ok());
  EXPECT_TRUE(evaluate_read(im("\"abc-3\""), "abc-3", kMtimeNs).ok());
}

TEST(S3Conditional, EtagWithCommaInsideQuotes) {
  EXPECT_TRUE(evaluate_read(im("\"a,b\""), "a,b", kMtimeNs).ok());
  EXPECT_EQ(evaluate_read(im("\"a\",\"b\""), "a,b", kMtimeNs).code(), Errc::precondition_failed);
}

TEST(S3Conditional, IfModifiedSince) {
  Conditions c;
  c.if_modified_since = kBefore;  // modified after the date
  EXPECT_EQ(eval(c), Errc::ok);
  c.if_modified_since = kAt;  // same second (sub-second mtime is rounded down)
  EXPECT_EQ(eval(c), Errc::not_modified);
  c.if_modified_since = kAfter;
  EXPECT_EQ(eval(c), Errc::not_modified);
  c.if_modified_since = "not a date";  // ignored
  EXPECT_EQ(eval(c), Errc::ok);
  c.if_modified_since = "";
  EXPECT_EQ(eval(c), Errc::ok);
}

TEST(S3Conditional, IfUnmodifiedSince) {
  Conditions c;
  c.if_unmodified_since = kBefore;
  EXPECT_EQ(eval(c), Errc::precondition_failed);
  c.if_unmodified_since = kAt;
  EXPECT_EQ(eval(c), Errc::ok);
  c.if_unmodified_since = kAfter;
  EXPECT_EQ(eval(c), Errc::ok);
  c.if_unmodified_since = "Sun, 06 Nov 1994 08:49:37";  // no zone: unparsable, ignored
  EXPECT_EQ(eval(c), Errc::ok);
}

// S3 documents: If-Match true + If-Unmodified-Since false -> 200.
TEST(S3Conditional, IfMatchTrueOverridesIfUnmodifiedSince) {
  Conditions c = im(std::string("\"") + kEtag + "\"");
  c.if_unmodified_since = kBefore;
  EXPECT_EQ(eval(c), Errc::ok);
  c.if_match = "\"other\"";
  EXPECT_EQ(eval(c), Errc::precondition_failed);
  c.if_unmodified_since = kAfter;  // true, but If-Match still fails
  EXPECT_EQ(eval(c), Errc::precondition_failed);
}

// S3 documents: If-None-Match false + If-Modified-Since true -> 304.
TEST(S3Conditional, IfNoneMatchTakesPrecedenceOverIfModifiedSince) {
  Conditions c = inm(std::string("\"") + kEtag + "\"");  // matches: condition false
  c.if_modified_since = kBefore;                         // modified since: condition true
  EXPECT_EQ(eval(c), Errc::not_modified);
  c.if_none_match = "\"other\"";  // condition true: If-Modified-Since is not consulted
  c.if_modified_since = kAfter;
  EXPECT_EQ(eval(c), Errc::ok);
}

TEST(S3Conditional, IfMatchMismatchBeatsIfNoneMatch) {
  Conditions c = im("\"other\"");
  c.if_none_match = std::string("\"") + kEtag + "\"";
  EXPECT_EQ(eval(c), Errc::precondition_failed);
  c.if_match = std::string("\"") + kEtag + "\"";  // If-Match passes, If-None-Match matches
  EXPECT_EQ(eval(c), Errc::not_modified);
  c.if_none_match = "\"other\"";
  EXPECT_EQ(eval(c), Errc::ok);
}

TEST(S3Conditional, IfUnmodifiedSinceFailureBeatsIfModifiedSince) {
  Conditions c;
  c.if_unmodified_since = kBefore;  // fails
  c.if_modified_since = kAfter;     // would be 304
  EXPECT_EQ(eval(c), Errc::precondition_failed);
  c.if_unmodified_since = kAfter;  // passes
  EXPECT_EQ(eval(c), Errc::not_modified);
}

// Every combination of the four headers, each absent / true / false, against a reference model
// written straight from RFC 9110 section 13.2.2.
TEST(S3Conditional, AllCombinationsMatchReferenceModel) {
  enum State { kAbsent, kTrue, kFalse };
  for (int a = 0; a < 3; ++a) {
    for (int b = 0; b < 3; ++b) {
      for (int d = 0; d < 3; ++d) {
        for (int e = 0; e < 3; ++e) {
          Conditions c;
          // If-Match true = matches; If-Unmodified-Since true = not modified after;
          // If-None-Match true = no tag matches; If-Modified-Since true = modified after.
          if (a != kAbsent) c.if_match = a == kTrue ? std::string(kEtag) : "\"x\"";
          if (b != kAbsent) c.if_unmodified_since = b == kTrue ? kAfter : kBefore;
          if (d != kAbsent) c.if_none_match = d == kTrue ? "\"x\"" : std::string(kEtag);
          if (e != kAbsent) c.if_modified_since = e == kTrue ? kBefore : kAfter;
          Errc want = Errc::ok;
          if (a == kFalse || (a == kAbsent && b == kFalse)) {
            want = Errc::precondition_failed;
          } else if (d == kFalse || (d == kAbsent && e == kFalse)) {
            want = Errc::not_modified;
          }
          EXPECT_EQ(eval(c), want) << a << b << d << e;
        }
      }
    }
  }
}

TEST(S3Conditional, PreEpochMtimeRoundsDown) {
  Conditions c;
  c.if_unmodified_since = "Wed, 31 Dec 1969 23:59:59 GMT";  // -1
  EXPECT_TRUE(evaluate_read(c, kEtag, -1).ok());            // -1 ns is in second -1
  EXPECT_TRUE(evaluate_read(c, kEtag, -1'000'000'000).ok());
  EXPECT_EQ(evaluate_read(c, kEtag, 0).code(), Errc::precondition_failed);
}

using Kind = WriteConditionSpec::Kind;

TEST(S3WriteConditions, None) {
  auto r = parse_write_conditions(std::nullopt, std::nullopt);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->kind, Kind::none);
  r = parse_write_conditions(std::string(""), std::string(" "));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->kind, Kind::none);
}

TEST(S3WriteConditions, IfNoneMatchStar) {
  auto r = parse_write_conditions(std::nullopt, std::string("*"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->kind, Kind::must_be_absent);
  r = parse_write_conditions(std::nullopt, std::string(" * "));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->kind, Kind::must_be_absent);
}

TEST(S3WriteConditions, IfNoneMatchEtagIsNotImplemented) {
  for (const char* v : {"\"abc\"", "abc", "W/\"abc\"", "*, \"a\"", "**"}) {
    const auto r = parse_write_conditions(std::nullopt, std::string(v));
    EXPECT_EQ(r.code(), Errc::not_implemented) << v;
    EXPECT_FALSE(r.status().message().empty());
  }
}

TEST(S3WriteConditions, IfMatchEtag) {
  for (const char* v : {"\"abc\"", "abc", " \"abc\" ", "\"abc\","}) {
    const auto r = parse_write_conditions(std::string(v), std::nullopt);
    ASSERT_TRUE(r.ok()) << v << ": " << r.status().to_string();
    EXPECT_EQ(r->kind, Kind::etag_must_match);
    EXPECT_EQ(r->etag, "abc");
  }
  const auto r =
      parse_write_conditions(std::string("\"9b2cf535f27731c974343645a3985328-3\""), std::nullopt);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->etag, "9b2cf535f27731c974343645a3985328-3");
}

TEST(S3WriteConditions, IfMatchRejections) {
  for (const char* v : {"*", "W/\"abc\"", "\"a\", \"b\"", "\"abc", "\"a\"junk"}) {
    EXPECT_EQ(parse_write_conditions(std::string(v), std::nullopt).code(), Errc::not_implemented)
        << v;
  }
  EXPECT_EQ(parse_write_conditions(std::string("\"\""), std::nullopt).code(),
            Errc::invalid_argument);
}

TEST(S3WriteConditions, BothHeaders) {
  EXPECT_EQ(parse_write_conditions(std::string("\"abc\""), std::string("*")).code(),
            Errc::not_implemented);
}

TEST(S3UnquoteEtag, Strips) {
  EXPECT_EQ(unquote_etag("\"abc\""), "abc");
  EXPECT_EQ(unquote_etag("W/\"abc\""), "abc");
  EXPECT_EQ(unquote_etag("abc"), "abc");
  EXPECT_EQ(unquote_etag(" \"abc\" "), "abc");
  EXPECT_EQ(unquote_etag("\"\""), "");
  EXPECT_EQ(unquote_etag("\""), "\"");
  EXPECT_EQ(unquote_etag(""), "");
  EXPECT_EQ(unquote_etag("\"abc"), "\"abc");
  EXPECT_EQ(unquote_etag("\"a\"b\""), "a\"b");
}

}  // namespace
}  // namespace objdirect::s3

namespace objdirect::s3 {
bool conditional_fuzz_one(const std::uint8_t* data, std::size_t size);  // conditional_fuzz.cc
namespace {

TEST(S3ConditionalFuzz, ReplayInvariants) {
  const std::vector<std::string> fields = {"-",
                                           "",
                                           "*",
                                           "\"abc\"",
                                           "W/\"abc\"",
                                           "abc",
                                           "\"a\", \"b\"",
                                           "\"unterminated",
                                           "Sun, 06 Nov 1994 08:49:37 GMT",
                                           "Sunday, 06-Nov-94 08:49:37 GMT",
                                           "Sun Nov  6 08:49:37 1994",
                                           "garbage",
                                           " * ",
                                           "\"abc-3\""};
  std::mt19937_64 rng(7);
  int checked = 0;
  for (int i = 0; i < 4000; ++i) {
    std::string in(8, '\0');
    const std::int64_t mtime_ns =
        static_cast<std::int64_t>(784111777 + static_cast<int>(rng() % 5) - 2) * 1'000'000'000;
    for (int b = 0; b < 8; ++b)
      in[b] = static_cast<char>(static_cast<std::uint64_t>(mtime_ns) >> (8 * b));
    for (int f = 0; f < 5; ++f) {
      if (f) in += '\n';
      std::string v = fields[rng() % fields.size()];
      if (rng() % 4 == 0 && !v.empty()) v[rng() % v.size()] = static_cast<char>(rng() % 128);
      if (f == 4 && v == "-") v = "abc";
      in += v;
    }
    ASSERT_TRUE(conditional_fuzz_one(reinterpret_cast<const std::uint8_t*>(in.data()), in.size()))
        << testing::PrintToString(in);
    ++checked;
  }
  EXPECT_EQ(checked, 4000);
}

}  // namespace
}  // namespace objdirect::s3
