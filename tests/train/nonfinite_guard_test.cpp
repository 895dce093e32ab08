#include "train/nonfinite_guard.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace moelab {
namespace {

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

TEST(NonfiniteGuard, SkipsAndCountsNonFiniteLosses) {
  NonfiniteGuard guard(3);
  EXPECT_FALSE(guard.should_skip(2.5));
  EXPECT_TRUE(guard.should_skip(kNan));
  EXPECT_TRUE(guard.should_skip(-kInf));
  EXPECT_EQ(guard.consecutive(), 2);
  EXPECT_FALSE(guard.exhausted());
  EXPECT_FALSE(guard.should_skip(2.4));  // a finite loss ends the run of bad ones
  EXPECT_EQ(guard.consecutive(), 0);
  EXPECT_EQ(guard.total(), 2);
}

TEST(NonfiniteGuard, ExhaustedAfterTheLimitInARow) {
  NonfiniteGuard guard(2);
  guard.should_skip(kInf);
  EXPECT_FALSE(guard.exhausted());
  guard.should_skip(kNan);
  EXPECT_TRUE(guard.exhausted());
  EXPECT_EQ(guard.total(), 2);
}

TEST(NonfiniteGuard, RestoreContinuesTheCounts) {
  NonfiniteGuard guard(3);
  guard.restore(7, 2);
  EXPECT_EQ(guard.total(), 7);
  guard.should_skip(kNan);
  EXPECT_TRUE(guard.exhausted());
  EXPECT_EQ(guard.total(), 8);
}

}  // namespace
}  // namespace moelab
