#include "server/rdma/reap_schedule.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace objdirect::rdma {
namespace {

using std::chrono::milliseconds;

const ReapClock::time_point t0 = ReapClock::time_point{} + std::chrono::hours(1);

TEST(ReapSchedule, NothingRetiredLooksOneIntervalLater) {
  EXPECT_EQ(next_reap(t0, {}, false, milliseconds(6000)), t0 + milliseconds(6000));
}

TEST(ReapSchedule, AYoungSetIsLookedAtWhenItComesOfAge) {
  // Retired 1 s before the pass: due 5 s after it, not a whole interval later (which freed it
  // up to 2 x the interval after its failure).
  const std::vector<ReapClock::time_point> young{t0 - milliseconds(1000), t0 - milliseconds(200)};
  EXPECT_EQ(next_reap(t0, young, false, milliseconds(6000)), t0 + milliseconds(5000));
}

TEST(ReapSchedule, ASetOfAgeNotYetSafeIsLookedAtAgainSoon) {
  // op_settled() said "not known" (its provider had not reported, or its lock was busy): the
  // next look is reap_recheck away, not a whole interval (6 s here).
  const std::vector<ReapClock::time_point> young{t0 - milliseconds(1000)};
  EXPECT_EQ(next_reap(t0, young, true, milliseconds(6000)), t0 + reap_recheck);
  EXPECT_EQ(next_reap(t0, {}, true, milliseconds(6000)), t0 + reap_recheck);
}

TEST(ReapSchedule, TheRecheckNeverExceedsTheInterval) {
  EXPECT_EQ(next_reap(t0, {}, true, milliseconds(20)), t0 + milliseconds(20));
  EXPECT_EQ(next_reap(t0, {}, true, milliseconds(100)), t0 + milliseconds(100));
}

TEST(ReapSchedule, ASetThatCameOfAgeMeanwhileIsDueAtOnce) {
  // Its `since` was read before the pass started; by now it is of age.
  const std::vector<ReapClock::time_point> young{t0 - milliseconds(6100)};
  EXPECT_EQ(next_reap(t0, young, false, milliseconds(6000)), t0);
}

TEST(ReapScheduleDeathTest, AZeroIntervalIsAProgrammerError) {
  EXPECT_DEATH(next_reap(t0, {}, false, milliseconds(0)), "reap interval");
}

}  // namespace
}  // namespace objdirect::rdma
