// Router top-k, gate weights, capacity drops and the auxiliary losses against
// small cases worked out by hand.
#include <gtest/gtest.h>

#include <cmath>

#include "model/local_dispatcher.h"
#include "model/moe_layer.h"
#include "model/router.h"
#include "model_test_util.h"

namespace moelab {
namespace {

// Logits chosen by hand: with an identity router weight, logits = x.
const std::vector<std::vector<double>> kLogits = {{1.0, 2.0, 0.0}, {0.0, 0.5, 3.0}};

torch::Tensor logits_tensor() {
  return torch::tensor({1.0, 2.0, 0.0, 0.0, 0.5, 3.0}, torch::kDouble).view({2, 3});
}

Router identity_router(Gate gate, double capacity_factor = 0.0) {
  Router router(3, 3, 2, gate, capacity_factor);
  router->to(torch::kDouble);
  torch::NoGradGuard no_grad;
  router->weight.copy_(torch::eye(3, torch::kDouble));
  return router;
}

// d_model 3, 3 experts, top-2: with an identity router the logits are the input.
Config three_expert_config() {
  Config cfg = testing::tiny_config(true);
  cfg.model.d_model = 3;
  cfg.moe.num_experts = 3;
  cfg.moe.top_k = 2;
  return cfg;
}

// A 3-expert MoE layer (double) whose router weight is the identity.
MoeLayer identity_moe(const Config& cfg) {
  MoeLayer moe(cfg.model.d_model, cfg.moe, std::make_shared<LocalDispatcher>(3), nullptr);
  moe->to(torch::kDouble);
  torch::NoGradGuard no_grad;
  moe->router->weight.copy_(torch::eye(3, torch::kDouble));
  return moe;
}

double softmax_of(const std::vector<double>& v, size_t i) {
  double sum = 0;
  for (double x : v) sum += std::exp(x);
  return std::exp(v[i]) / sum;
}

TEST(Router, TopKIdsAndMixtralGates) {
  const auto out = identity_router(Gate::kTopkSoftmax)->forward(logits_tensor());
  EXPECT_TRUE(torch::equal(out.expert_ids, torch::tensor({1, 0, 2, 1}, torch::kLong).view({2, 2})));
  // Softmax over the two selected logits: token 0 has (2, 1), token 1 has (3, 0.5).
  const double g00 = 1.0 / (1.0 + std::exp(-1.0)), g10 = 1.0 / (1.0 + std::exp(-2.5));
  const auto expected = torch::tensor({g00, 1 - g00, g10, 1 - g10}, torch::kDouble).view({2, 2});
  EXPECT_TRUE(torch::allclose(out.gates, expected, 1e-12, 1e-12)) << out.gates;
  EXPECT_TRUE(torch::equal(out.kept_ids, out.expert_ids));
}

TEST(Router, FullSoftmaxGatesAreNotRenormalised) {
  const auto out = identity_router(Gate::kFullSoftmax)->forward(logits_tensor());
  const auto expected = torch::tensor({softmax_of(kLogits[0], 1), softmax_of(kLogits[0], 0),
                                       softmax_of(kLogits[1], 2), softmax_of(kLogits[1], 1)},
                                      torch::kDouble)
                            .view({2, 2});
  EXPECT_TRUE(torch::allclose(out.gates, expected, 1e-12, 1e-12)) << out.gates;
  EXPECT_TRUE((out.gates.sum(-1) < 1.0 - 1e-3).all().item<bool>()) << out.gates;
}

TEST(Capacity, DropsLateAssignmentsInTokenOrder) {
  // capacity 2 per expert; expert 0 arrives at (0,0), (1,1), (2,0): the third drops.
  const auto ids = torch::tensor({0, 1, 1, 0, 0, 1}, torch::kLong).view({3, 2});
  const auto kept = apply_capacity(ids, 2, 2);
  EXPECT_TRUE(torch::equal(kept, torch::tensor({0, 1, 1, 0, -1, -1}, torch::kLong).view({3, 2})))
      << kept;
}

TEST(Capacity, ScorePolicyKeepsTheHighestPrioritiesFirst) {
  // Capacity 1 per expert. Expert 0 is chosen by (0,0), (1,1) and (2,0); by
  // priority (1,1) comes first, so it stays and the other two drop.
  const auto ids = torch::tensor({0, 1, 1, 0, 0, 1}, torch::kLong).view({3, 2});
  const auto priority = torch::tensor({0.2, 0.9, 0.3, 0.8, 0.1, 0.4}, torch::kDouble).view({3, 2});
  const auto kept = apply_capacity(ids, 2, 1, priority);
  EXPECT_TRUE(torch::equal(kept, torch::tensor({-1, 1, -1, 0, -1, -1}, torch::kLong).view({3, 2})))
      << kept;
}

TEST(Router, SelectionBiasChangesTheChoiceButNotTheGates) {
  Router router(3, 3, 1, Gate::kFullSoftmax, 0.0, DropPolicy::kPosition, /*selection_bias=*/true);
  router->to(torch::kDouble);
  {
    torch::NoGradGuard no_grad;
    router->weight.copy_(torch::eye(3, torch::kDouble));
    router->bias.copy_(torch::tensor({5.0, 0.0, 0.0}, torch::kDouble));
  }
  const auto out = router->forward(logits_tensor());
  // Expert 0 wins for both tokens, with its unbiased probability as the gate.
  EXPECT_TRUE(torch::equal(out.expert_ids, torch::zeros({2, 1}, torch::kLong)));
  EXPECT_NEAR(out.gates[0][0].item<double>(), softmax_of(kLogits[0], 0), 1e-12);
  EXPECT_NEAR(out.gates[1][0].item<double>(), softmax_of(kLogits[1], 0), 1e-12);
}

TEST(Capacity, RouterUsesCeilOfFactorTimesShare) {
  // T=2, k=2, E=3, factor 0.7: capacity = ceil(0.7 * 4 / 3) = 1. Expert 1 is
  // chosen by both tokens, so token 1's slot 1 (expert 1) drops.
  const auto out = identity_router(Gate::kTopkSoftmax, 0.7)->forward(logits_tensor());
  EXPECT_TRUE(torch::equal(out.kept_ids, torch::tensor({1, 0, 2, -1}, torch::kLong).view({2, 2})))
      << out.kept_ids;
}

TEST(MoeLosses, AuxAndZLossMatchHandComputation) {
  Config cfg = three_expert_config();
  cfg.moe.aux_loss_coef = 0.3;
  cfg.moe.z_loss_coef = 0.2;
  MoeLayer moe = identity_moe(cfg);
  const auto out = moe->forward(logits_tensor(), torch::kDouble);
  // Assignments: token 0 -> {1, 0}, token 1 -> {2, 1}: f = (1, 2, 1) / 4.
  const double f[3] = {0.25, 0.5, 0.25};
  double aux = 0, z = 0, entropy = 0;
  for (size_t i = 0; i < 3; ++i) {
    const double mean_p = (softmax_of(kLogits[0], i) + softmax_of(kLogits[1], i)) / 2;
    aux += f[i] * mean_p;
  }
  aux *= 0.3 * 3;
  for (const auto& row : kLogits) {
    double sum = 0;
    for (double x : row) sum += std::exp(x);
    z += std::pow(std::log(sum), 2) / 2;
    for (size_t i = 0; i < 3; ++i) entropy -= softmax_of(row, i) * std::log(softmax_of(row, i)) / 2;
  }
  z *= 0.2;
  EXPECT_NEAR(out.aux_loss.item<double>(), aux, 1e-12);
  EXPECT_NEAR(out.z_loss.item<double>(), z, 1e-12);
  EXPECT_TRUE(torch::allclose(out.stats.load.to(torch::kDouble),
                              torch::tensor({0.25, 0.5, 0.25}, torch::kDouble)));
  EXPECT_DOUBLE_EQ(out.stats.drop_fraction.item<double>(), 0.0);
  EXPECT_NEAR(out.stats.router_entropy.item<double>(), entropy, 1e-12);
}

TEST(MoeLosses, GlobalStatisticsUseTheReducedLoad) {
  Config cfg = testing::tiny_config(true);
  cfg.model.d_model = 3;
  cfg.moe.num_experts = 3;
  cfg.moe.aux_loss_coef = 1.0;
  // A stand-in for the all-reduce: pretend the other ranks made the load uniform.
  auto reduce = [](const torch::Tensor& stats) {
    auto out = stats.clone();
    out.narrow(0, 0, 3).fill_(1.0 / 3);
    return out;
  };
  MoeLayer moe(cfg.model.d_model, cfg.moe, std::make_shared<LocalDispatcher>(3), reduce);
  moe->to(torch::kDouble);
  const auto x = torch::randn({4, 3}, torch::kDouble);
  const auto out = moe->forward(x, torch::kDouble);
  // With uniform f the loss is E * sum_i P_i / E = sum_i P_i = 1.
  EXPECT_NEAR(out.aux_loss.item<double>(), 1.0, 1e-12);
  EXPECT_TRUE(torch::allclose(out.stats.load, torch::full({3}, 1.0f / 3)));
}

TEST(MoeBalance, AuxFreeBiasMovesTowardsBalanceAfterEachStep) {
  Config cfg = three_expert_config();
  cfg.moe.balance = Balance::kAuxFree;
  cfg.moe.bias_update_rate = 0.25;
  MoeLayer moe = identity_moe(cfg);
  // Load (1, 2, 1) / 4 as in the test above: expert 1 is over the mean 1/3.
  auto out = moe->forward(logits_tensor(), torch::kDouble);
  EXPECT_EQ(out.aux_loss.item<double>(), 0.0);
  moe->eval();  // evaluation batches never count
  moe->forward(logits_tensor() * 0 + torch::tensor({0.0, 5.0, 4.0}, torch::kDouble),
               torch::kDouble);
  moe->train();
  moe->update_balance_bias();
  EXPECT_TRUE(torch::equal(moe->router->bias, torch::tensor({0.25, -0.25, 0.25}, torch::kDouble)))
      << moe->router->bias;
  // The step's load is forgotten once used; a skipped step forgets it unused.
  moe->update_balance_bias();
  moe->forward(logits_tensor(), torch::kDouble);
  moe->update_balance_bias(/*apply=*/false);
  EXPECT_TRUE(torch::equal(moe->router->bias, torch::tensor({0.25, -0.25, 0.25}, torch::kDouble)));
}

TEST(MoeBalance, SequenceLossBalancesEachSequence) {
  // Two sequences of one token each: within each, f and P come from that token
  // alone, so the loss is the mean of the two single-token Switch losses.
  Config cfg = three_expert_config();
  cfg.moe.aux_loss_coef = 0.3;
  cfg.moe.balance = Balance::kSequence;
  MoeLayer moe = identity_moe(cfg);
  const auto out = moe->forward(logits_tensor(), torch::kDouble, /*seq_len=*/1);
  // Token 0 chose {1, 0}, token 1 chose {2, 1}: f = 1/2 on each chosen expert.
  const double token0 = 0.5 * (softmax_of(kLogits[0], 1) + softmax_of(kLogits[0], 0));
  const double token1 = 0.5 * (softmax_of(kLogits[1], 2) + softmax_of(kLogits[1], 1));
  EXPECT_NEAR(out.aux_loss.item<double>(), 0.3 * 3 * (token0 + token1) / 2, 1e-12);
}

}  // namespace
}  // namespace moelab
