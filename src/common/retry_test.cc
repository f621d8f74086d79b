#include "common/retry.hpp"

#include <gtest/gtest.h>

#include "common/time.hpp"

namespace objdirect::retry {
namespace {

using std::chrono::milliseconds;

TEST(RetryPolicy, DefaultsAreBoto3Standard) {
  Policy p;
  EXPECT_EQ(p.mode, Mode::standard);
  EXPECT_EQ(p.max_attempts, 3u);
  EXPECT_TRUE(p.validate().ok());
}

TEST(RetryPolicy, ApplyParsesAndRejects) {
  Policy p;
  ASSERT_TRUE(p.apply("7", "adaptive", "AWS_MAX_ATTEMPTS").ok());
  EXPECT_EQ(p.max_attempts, 7u);
  EXPECT_EQ(p.mode, Mode::adaptive);
  ASSERT_TRUE(p.apply("", "legacy", "x").ok());
  EXPECT_EQ(p.mode, Mode::standard);
  EXPECT_EQ(p.max_attempts, 7u);  // empty leaves it
  for (const char* bad : {"0", "-1", "x", "3x", "21"}) {
    auto st = p.apply(bad, "", "AWS_MAX_ATTEMPTS");
    EXPECT_EQ(st.code(), Errc::invalid_argument) << bad;
    EXPECT_NE(st.message().find("AWS_MAX_ATTEMPTS"), std::string::npos);
  }
  EXPECT_EQ(p.apply("", "fast", "AWS_RETRY_MODE").code(), Errc::invalid_argument);
}

TEST(RetryPolicy, AttemptsMaxIsEnforced) {
  Policy p;
  p.max_attempts = limits::retry_attempts_max;
  EXPECT_TRUE(p.validate().ok());
  p.max_attempts = limits::retry_attempts_max + 1;
  EXPECT_EQ(p.validate().code(), Errc::invalid_argument);
  p.max_attempts = 0;
  EXPECT_EQ(p.validate().code(), Errc::invalid_argument);
}

TEST(RetryPolicy, BackoffMaxIsEnforced) {
  Policy p;
  p.max_backoff = milliseconds(limits::retry_backoff_ms_max + 1);
  EXPECT_EQ(p.validate().code(), Errc::invalid_argument);
  p.max_backoff = milliseconds(50);
  p.base_delay = milliseconds(60);
  EXPECT_EQ(p.validate().code(), Errc::invalid_argument);
}

TEST(RetryClassify, RetriedStatusesAndCodes) {
  for (int s : {429, 500, 502, 503, 504}) {
    auto r = classify_status(s, "");
    ASSERT_TRUE(r) << s;
    EXPECT_EQ(*r, "http_" + std::to_string(s));
  }
  for (int s : {200, 301, 307, 400, 403, 404, 409, 412, 416, 501}) {
    EXPECT_FALSE(classify_status(s, "")) << s;
  }
  EXPECT_EQ(*classify_status(503, "SlowDown"), "SlowDown");
  EXPECT_EQ(*classify_status(500, "InternalError"), "InternalError");
  EXPECT_EQ(*classify_status(400, "RequestTimeout"), "RequestTimeout");
  EXPECT_EQ(*classify_status(400, "Throttling"), "Throttling");
  EXPECT_FALSE(classify_status(404, "NoSuchKey"));
  EXPECT_FALSE(classify_status(403, "RequestTimeTooSkewed"));
  EXPECT_FALSE(classify_status(400, "InvalidRDMAToken"));
  EXPECT_TRUE(is_throttle("SlowDown"));
  EXPECT_TRUE(is_throttle("http_429"));
  EXPECT_FALSE(is_throttle("InternalError"));
  EXPECT_FALSE(is_throttle("connection_reset"));
}

TEST(RetryBackoff, FullJitterWithinExponentialCeiling) {
  Policy p;
  p.base_delay = milliseconds(100);
  p.max_backoff = milliseconds(1000);
  EXPECT_EQ(backoff_delay(p, 1, 0.0, {}), milliseconds(0));
  EXPECT_EQ(backoff_delay(p, 1, 0.5, {}), milliseconds(50));
  EXPECT_EQ(backoff_delay(p, 2, 0.5, {}), milliseconds(100));
  EXPECT_EQ(backoff_delay(p, 3, 0.999, {}), milliseconds(399));
  EXPECT_EQ(backoff_delay(p, 10, 0.5, {}), milliseconds(500));   // capped at max_backoff
  EXPECT_EQ(backoff_delay(p, 100, 0.5, {}), milliseconds(500));  // no overflow
  Retrier r(p);
  for (std::uint32_t i = 1; i <= 6; ++i) {
    auto d = r.delay(i, {});
    EXPECT_GE(d.count(), 0);
    EXPECT_LE(d, std::min(milliseconds(100 << (i - 1)), milliseconds(1000)));
  }
}

TEST(RetryBackoff, RetryAfterIsAFloorCappedAtMaxBackoff) {
  Policy p;
  p.max_backoff = milliseconds(3000);
  EXPECT_EQ(backoff_delay(p, 1, 0.0, milliseconds(1000)), milliseconds(1000));
  EXPECT_EQ(backoff_delay(p, 1, 0.0, milliseconds(60000)), milliseconds(3000));
  auto now = std::chrono::system_clock::now();
  EXPECT_EQ(*parse_retry_after("2", now), milliseconds(2000));
  EXPECT_EQ(*parse_retry_after(" 0 ", now), milliseconds(0));
  EXPECT_FALSE(parse_retry_after("soon", now));
  EXPECT_FALSE(parse_retry_after("", now));
  auto later = std::chrono::time_point_cast<std::chrono::seconds>(now) + std::chrono::seconds(5);
  auto d = parse_retry_after(http_date(later), now);
  ASSERT_TRUE(d);
  EXPECT_GT(d->count(), 3000);
  EXPECT_LE(d->count(), 5000);
  EXPECT_EQ(*parse_retry_after(http_date(now - std::chrono::hours(1)), now), milliseconds(0));
}

TEST(RetryAdaptive, ThrottleEngagesAndCutsTheRate) {
  RateLimiter l;
  EXPECT_EQ(l.rate(), 0);
  l.acquire();  // not engaged: no wait
  for (int i = 0; i < 20; ++i) l.on_answer(false);
  EXPECT_EQ(l.rate(), 0);
  l.on_answer(true);
  const double r1 = l.rate();
  EXPECT_GT(r1, 0);
  l.on_answer(true);
  EXPECT_LE(l.rate(), r1);
  // Tokens are handed out at about the fill rate once engaged.
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 3; ++i) l.acquire();
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GE(waited, 1.0 / std::max(l.rate(), 0.5) - 0.05);
}

TEST(RetryNote, NamesTheAttempts) {
  EXPECT_EQ(attempts_note(3, "SlowDown, SlowDown"),
            " (after 3 attempts; retried on: SlowDown, SlowDown)");
  EXPECT_EQ(attempts_note(1, ""), " (after 1 attempt)");
}

}  // namespace
}  // namespace objdirect::retry
