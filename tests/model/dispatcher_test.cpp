// LocalDispatcher: grouping by expert, exact round trip, dropped assignments,
// and gradients through dispatch and combine.
#include <gtest/gtest.h>

#include "model/local_dispatcher.h"

namespace moelab {
namespace {

TEST(LocalDispatcher, GroupsRowsByExpertInTokenOrder) {
  LocalDispatcher dispatcher(3);
  const auto hidden = torch::arange(4, torch::kDouble).view({4, 1});
  const auto ids = torch::tensor({2, 0, 0, 1, 2, 1, 0, 2}, torch::kLong).view({4, 2});
  const auto out = dispatcher.dispatch(hidden, ids);
  EXPECT_EQ(out.counts, (std::vector<int64_t>{3, 2, 3}));
  // expert 0: tokens 0, 1, 3; expert 1: tokens 1, 2; expert 2: tokens 0, 2, 3.
  const auto expected =
      torch::tensor({0., 1., 3., 1., 2., 0., 2., 3.}, torch::kDouble).view({8, 1});
  EXPECT_TRUE(torch::equal(out.tokens, expected)) << out.tokens;
  EXPECT_EQ(dispatcher.local_expert_ids(), (std::vector<int64_t>{0, 1, 2}));
}

TEST(LocalDispatcher, IdentityExpertsRoundTripExactly) {
  torch::manual_seed(5);
  LocalDispatcher dispatcher(4);
  const auto hidden = torch::randn({9, 5});
  const auto ids = torch::randint(0, 4, {9, 3}, torch::kLong);
  const auto combined = dispatcher.combine(dispatcher.dispatch(hidden, ids).tokens);
  EXPECT_TRUE(torch::equal(combined, hidden.unsqueeze(1).expand({9, 3, 5})));
}

TEST(LocalDispatcher, DroppedAssignmentsComeBackAsZeros) {
  LocalDispatcher dispatcher(2);
  const auto hidden = torch::ones({2, 3});
  const auto ids = torch::tensor({0, -1, -1, 1}, torch::kLong).view({2, 2});
  const auto dispatched = dispatcher.dispatch(hidden, ids);
  EXPECT_EQ(dispatched.counts, (std::vector<int64_t>{1, 1}));
  const auto combined = dispatcher.combine(dispatched.tokens);
  const auto expected =
      torch::tensor({1., 1., 1., 0., 0., 0., 0., 0., 0., 1., 1., 1.}).view({2, 2, 3});
  EXPECT_TRUE(torch::equal(combined, expected)) << combined;
}

TEST(LocalDispatcher, GradientFlowsBackToEachTokenOncePerAssignment) {
  LocalDispatcher dispatcher(3);
  const auto hidden = torch::randn({4, 2}, torch::kDouble).requires_grad_(true);
  const auto ids = torch::tensor({2, 0, -1, 1, 1, 0, 0, -1}, torch::kLong).view({4, 2});
  const auto dispatched = dispatcher.dispatch(hidden, ids);
  dispatcher.combine(dispatched.tokens * 3.0).sum().backward();
  // d/dh of sum over kept assignments of 3 h = 3 * (number of kept slots).
  const auto expected =
      torch::tensor({6., 6., 3., 3., 6., 6., 3., 3.}, torch::kDouble).view({4, 2});
  EXPECT_TRUE(torch::equal(hidden.grad(), expected)) << hidden.grad();
}

}  // namespace
}  // namespace moelab
