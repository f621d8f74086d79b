#include "common/assert.hpp"

#include <gtest/gtest.h>

namespace objdirect {
namespace {

int evaluations = 0;
bool counted(bool v) {
  ++evaluations;
  return v;
}

TEST(ObjdirectAssert, PassesAndEvaluatesOnce) {
  evaluations = 0;
  OBJDIRECT_ASSERT(counted(true), "never fires");
  EXPECT_EQ(evaluations, 1);
}

// Active in every build: this binary is compiled with -DNDEBUG in Release, where assert() is off.
TEST(ObjdirectAssertDeathTest, AbortsWithConditionReasonAndPlace) {
  EXPECT_DEATH(
      OBJDIRECT_ASSERT(1 + 1 == 3, "arithmetic broke"),
      "assert_test.cc:[0-9]+: OBJDIRECT_ASSERT\\(1 \\+ 1 == 3\\) failed: arithmetic broke");
}

}  // namespace
}  // namespace objdirect
