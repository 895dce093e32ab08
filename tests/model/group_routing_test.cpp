// Group-limited routing (DeepSeek-V2/V3) against ids worked out by hand: six
// experts in three groups of two, {0, 1}, {2, 3}, {4, 5}; top-3 among the
// best 2 groups.
#include <gtest/gtest.h>

#include <cmath>

#include "model/local_dispatcher.h"
#include "model/moe_layer.h"
#include "model/router.h"
#include "model_test_util.h"

namespace moelab {
namespace {

// Per token, the affinity of each expert. Token 0's groups score
//   top2_sum: 1.00, 1.55, 1.05 -> groups 1, 2;  max: 0.90, 0.80, 0.85 -> groups 0, 2;
// token 1 holds the same groups rotated by one. Plain top-3 reaches all three
// groups for both tokens: {0, 4, 2} and {2, 0, 4}.
const std::vector<double> kAffinities = {0.90, 0.10, 0.80, 0.75, 0.85, 0.20,   // token 0
                                         0.85, 0.20, 0.90, 0.10, 0.80, 0.75};  // token 1

torch::Tensor affinities() {
  return torch::tensor(kAffinities, torch::kDouble).view({2, 6});
}

// Logits whose scores order (and group) the experts as the affinities do:
// sigmoid scores equal them; softmax scores are proportional to them.
torch::Tensor logits_for(Score score) {
  const auto a = affinities();
  return score == Score::kSigmoid ? torch::log(a / (1 - a)) : torch::log(a);
}

Router group_router(Score score, GroupScore group_score, int64_t topk_groups = 2,
                    bool selection_bias = false) {
  Router router(6, 6, 3, Gate::kTopkSoftmax, 0.0, DropPolicy::kPosition, selection_bias, score, 1.0,
                GroupLimit{3, topk_groups, group_score});
  router->to(torch::kDouble);
  torch::NoGradGuard no_grad;
  router->weight.copy_(torch::eye(6, torch::kDouble));  // logits = x
  return router;
}

torch::Tensor ids(std::vector<int64_t> v) {
  return torch::tensor(v, torch::kLong).view({2, 3});
}

TEST(GroupLimitedRouting, ChoosesOnlyFromTheBestGroupsByEitherGroupScore) {
  for (Score score : {Score::kSoftmax, Score::kSigmoid}) {
    SCOPED_TRACE(choice_name(score));
    const auto x = logits_for(score);
    // V3: groups by the sum of their two best affinities.
    EXPECT_TRUE(torch::equal(group_router(score, GroupScore::kTop2Sum)->forward(x).expert_ids,
                             ids({4, 2, 3, 0, 4, 5})));
    // V2: groups by their best affinity.
    EXPECT_TRUE(torch::equal(group_router(score, GroupScore::kMax)->forward(x).expert_ids,
                             ids({0, 4, 5, 2, 0, 1})));
    // All groups allowed: plain top-3.
    EXPECT_TRUE(torch::equal(group_router(score, GroupScore::kTop2Sum, 3)->forward(x).expert_ids,
                             ids({0, 4, 2, 2, 0, 4})));
  }
}

TEST(GroupLimitedRouting, MaskHoldsTheChosenGroupsExperts) {
  const auto mask = group_limited_mask(affinities(), GroupLimit{3, 1, GroupScore::kTop2Sum});
  const auto expected = torch::tensor({0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 1, 1}, torch::kBool);
  EXPECT_TRUE(torch::equal(mask, expected.view({2, 6}))) << mask;
}

// DeepSeek-V3 picks the groups on the bias-added scores; the gates stay the
// unbiased scores, normalised over the chosen experts.
TEST(GroupLimitedRouting, SelectionBiasSteersTheGroupChoiceNotTheGates) {
  Router router = group_router(Score::kSigmoid, GroupScore::kTop2Sum, 2, /*selection_bias=*/true);
  {
    torch::NoGradGuard no_grad;
    router->bias.copy_(torch::tensor({0.0, 0.6, 0.0, 0.0, 0.0, 0.0}, torch::kDouble));
  }
  // Token 0's biased group scores: 1.60, 1.55, 1.05 -> groups 0, 1 (unbiased
  // they would be 1, 2 and the choice {4, 2, 3}).
  const auto out = router->forward(logits_for(Score::kSigmoid).narrow(0, 0, 1));
  EXPECT_TRUE(torch::equal(out.expert_ids, torch::tensor({{0, 2, 3}}, torch::kLong)))
      << out.expert_ids;
  const double total = 0.90 + 0.80 + 0.75;
  const auto gates = torch::tensor({{0.90 / total, 0.80 / total, 0.75 / total}}, torch::kDouble);
  EXPECT_TRUE(torch::allclose(out.gates, gates, 1e-12, 1e-12)) << out.gates;
}

// All six experts on this rank, as if an expert-parallel group of three
// held one group each: experts 2r and 2r + 1 on rank r.
class GroupPerRank : public LocalDispatcher {
 public:
  GroupPerRank() : LocalDispatcher(6) {}
  std::vector<int64_t> expert_ranks(int64_t) const override { return {0, 0, 1, 1, 2, 2}; }
};

double ranks_per_token(int64_t topk_groups) {
  Config cfg = testing::tiny_config(true);
  cfg.model.d_model = 6;
  cfg.moe.num_experts = 6;
  cfg.moe.top_k = 3;
  cfg.moe.n_groups = 3;
  cfg.moe.topk_groups = topk_groups;
  cfg.moe.score = Score::kSigmoid;
  MoeLayer moe(6, cfg.moe, std::make_shared<GroupPerRank>(), nullptr);
  moe->to(torch::kDouble);
  {
    torch::NoGradGuard no_grad;
    for (auto& p : moe->parameters()) p.zero_();
    moe->router->weight.copy_(torch::eye(6, torch::kDouble));
  }
  const auto out = moe->forward(logits_for(Score::kSigmoid), torch::kDouble);
  return out.stats.ranks_per_token.item<double>();
}

// Groups on ranks bound the ranks a token's rows travel to (DeepSeek's device
// limit): 2 with two groups picked, where plain top-3 reaches all 3 ranks.
TEST(GroupLimitedRouting, StatisticsCountTheRanksATokenReaches) {
  EXPECT_DOUBLE_EQ(ranks_per_token(2), 2.0);
  EXPECT_DOUBLE_EQ(ranks_per_token(3), 3.0);
}

}  // namespace
}  // namespace moelab
