// Sinkhorn-Knopp reaches the balanced marginals, and the hard assignment gives
// every expert exactly its share.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <vector>

#include "convert/balanced_assignment.h"

namespace moelab {
namespace {

TEST(Sinkhorn, RowsAndColumnsSumToTheirTargets) {
  torch::manual_seed(0);
  const auto scores = torch::randn({48, 6}, torch::kFloat64) * 3;
  const auto plan = sinkhorn(scores, /*temperature=*/0.5, /*iterations=*/500);
  EXPECT_LE((plan.sum(1) - 1.0).abs().max().item<double>(), 1e-6);
  EXPECT_LE((plan.sum(0) - 48.0 / 6).abs().max().item<double>(), 1e-6);
  EXPECT_GE(plan.min().item<double>(), 0.0);
}

TEST(Sinkhorn, GradientsFlowToTheScores) {
  torch::manual_seed(1);
  auto scores = torch::randn({8, 4}, torch::kFloat64).requires_grad_(true);
  // Any weighting that is not constant over the marginals has a gradient.
  (sinkhorn(scores, 1.0, 50) * torch::arange(32, torch::kFloat64).view({8, 4})).sum().backward();
  ASSERT_TRUE(scores.grad().defined());
  EXPECT_GT(scores.grad().abs().sum().item<double>(), 0.0);
}

TEST(BalancedAssignment, EveryExpertGetsExactlyItsShare) {
  torch::manual_seed(2);
  // Skewed scores: most units prefer expert 0, which can take only 10 of them.
  auto scores = torch::randn({40, 4}, torch::kFloat64);
  scores.select(1, 0) += 5.0;
  const auto expert_of = balanced_assignment(scores);
  std::vector<int> count(4, 0);
  for (int64_t e : expert_of) ++count[size_t(e)];
  EXPECT_EQ(count, (std::vector<int>{10, 10, 10, 10}));
  // The 10 units with the highest expert-0 scores are the ones that got it.
  const auto top = std::get<1>(scores.select(1, 0).topk(10));
  for (int64_t i = 0; i < 10; ++i) EXPECT_EQ(expert_of[size_t(top[i].item<int64_t>())], 0);
}

TEST(BalancedAssignment, KeepsABalancedArgmaxAsItIs) {
  const auto scores = torch::eye(4, torch::kFloat64).repeat({2, 1});  // unit u prefers u % 4
  EXPECT_EQ(balanced_assignment(scores), (std::vector<int64_t>{0, 1, 2, 3, 0, 1, 2, 3}));
}

TEST(BalancedAssignment, UnitsThatDoNotSplitEvenlyAreRefused) {
  EXPECT_THROW(balanced_assignment(torch::zeros({10, 4})), std::invalid_argument);
}

}  // namespace
}  // namespace moelab
