#include "common/time.hpp"

#include <gtest/gtest.h>

namespace objdirect {
namespace {

using namespace std::chrono;

SysTime at(int y, unsigned mo, unsigned d, int h, int mi, int s) {
  return sys_days{year{y} / month{mo} / day{d}} + hours{h} + minutes{mi} + seconds{s};
}

TEST(Time, AmzDate) {
  SysTime t = at(2013, 5, 24, 0, 0, 0);
  EXPECT_EQ(amz_date(t), "20130524T000000Z");
  EXPECT_EQ(amz_date(t + milliseconds{999}), "20130524T000000Z");  // truncates
  EXPECT_EQ(parse_amz_date("20130524T000000Z"), t);
  EXPECT_EQ(parse_amz_date("20240229T235959Z"), at(2024, 2, 29, 23, 59, 59));
  EXPECT_FALSE(parse_amz_date("20230229T000000Z").has_value());  // not a leap year
  EXPECT_FALSE(parse_amz_date("20130524T240000Z").has_value());
  EXPECT_FALSE(parse_amz_date("20130524T000000").has_value());
  EXPECT_FALSE(parse_amz_date("20130524 000000Z").has_value());
  EXPECT_FALSE(parse_amz_date("2013052aT000000Z").has_value());
  EXPECT_FALSE(parse_amz_date("20131324T000000Z").has_value());
  EXPECT_FALSE(parse_amz_date("").has_value());
}

// Regression (http_request_fuzz): a year past 2262 overflowed system_clock's nanoseconds (signed
// overflow, undefined behaviour) instead of being refused.
TEST(Time, DatesBeyondSystemClockRangeAreRefusedNotOverflowed) {
  EXPECT_FALSE(parse_amz_date("40520202T000000Z").has_value());
  EXPECT_FALSE(parse_amz_date("99991231T235959Z").has_value());
  EXPECT_FALSE(parse_amz_date("22620101T000000Z").has_value());
  EXPECT_FALSE(parse_amz_date("16000101T000000Z").has_value());
  EXPECT_EQ(parse_amz_date("22611231T235959Z"), at(2261, 12, 31, 23, 59, 59));
  EXPECT_FALSE(parse_http_date("Sat, 01 Jan 4052 00:00:00 GMT").has_value());
  EXPECT_FALSE(parse_iso8601("4052-01-01T00:00:00Z").has_value());
}

TEST(Time, HttpDate) {
  SysTime t = at(2015, 10, 21, 7, 28, 0);
  EXPECT_EQ(http_date(t), "Wed, 21 Oct 2015 07:28:00 GMT");
  EXPECT_EQ(http_date(at(1994, 11, 6, 8, 49, 37)), "Sun, 06 Nov 1994 08:49:37 GMT");
  EXPECT_EQ(parse_http_date("Wed, 21 Oct 2015 07:28:00 GMT"), t);
  EXPECT_EQ(parse_http_date("Sunday, 06-Nov-94 08:49:37 GMT"), at(1994, 11, 6, 8, 49, 37));
  EXPECT_EQ(parse_http_date("Sun Nov  6 08:49:37 1994"), at(1994, 11, 6, 8, 49, 37));
  EXPECT_EQ(parse_http_date("Wed Oct 21 07:28:00 2015"), t);
  EXPECT_EQ(parse_http_date("Thursday, 01-Jan-37 00:00:00 GMT"), at(2037, 1, 1, 0, 0, 0));
  EXPECT_FALSE(parse_http_date("Wed, 21 Oct 2015 07:28:00 UTC").has_value());
  EXPECT_FALSE(parse_http_date("Xyz, 21 Oct 2015 07:28:00 GMT").has_value());
  EXPECT_FALSE(parse_http_date("Wed, 31 Apr 2015 07:28:00 GMT").has_value());
  EXPECT_FALSE(parse_http_date("Wed, 21 Foo 2015 07:28:00 GMT").has_value());
  EXPECT_FALSE(parse_http_date("2015-10-21T07:28:00Z").has_value());
  EXPECT_FALSE(parse_http_date("").has_value());
}

TEST(Time, Iso8601) {
  SysTime t = at(2009, 10, 12, 17, 50, 30);
  EXPECT_EQ(iso8601_ms(t), "2009-10-12T17:50:30.000Z");
  EXPECT_EQ(iso8601_ms(t + milliseconds{7} + microseconds{999}), "2009-10-12T17:50:30.007Z");
  EXPECT_EQ(parse_iso8601("2009-10-12T17:50:30.000Z"), t);
  EXPECT_EQ(parse_iso8601("2009-10-12T17:50:30Z"), t);
  EXPECT_EQ(parse_iso8601("2009-10-12T17:50:30.5Z"), t + milliseconds{500});
  EXPECT_EQ(parse_iso8601("2009-10-12T17:50:30.123456789Z"), t + milliseconds{123});
  EXPECT_FALSE(parse_iso8601("2009-10-12T17:50:30.Z").has_value());
  EXPECT_FALSE(parse_iso8601("2009-10-12 17:50:30Z").has_value());
}

TEST(Time, RoundTripsOverManyDays) {
  SysTime t = at(1970, 1, 1, 0, 0, 0);
  for (int i = 0; i < 5000; ++i) {
    t += hours{24 * 7 + 13} + seconds{17};
    SysTime whole = floor<seconds>(t);
    ASSERT_EQ(parse_amz_date(amz_date(t)), whole);
    ASSERT_EQ(parse_http_date(http_date(t)), whole);
    ASSERT_EQ(parse_iso8601(iso8601_ms(t)), floor<milliseconds>(t));
  }
  // Before the epoch, truncation still goes towards the past.
  SysTime pre = at(1969, 12, 31, 23, 59, 59) + milliseconds{500};
  EXPECT_EQ(amz_date(pre), "19691231T235959Z");
  EXPECT_EQ(iso8601_ms(pre), "1969-12-31T23:59:59.500Z");
}

}  // namespace
}  // namespace objdirect
