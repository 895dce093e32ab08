// Routing analysis: expert counts against a hand count of the routers'
// choices, the distribution measures against hand-computed values.
#include "train/routing_analysis.h"

#include <gtest/gtest.h>

#include <cmath>

#include "common/temp_dir.h"
#include "data/data_test_util.h"
#include "model/model_test_util.h"
#include "train/expert_distribution.h"
#include "train/routing_counts.h"

namespace moelab {
namespace {

// The model tests' tiny MoE, with capacity: some assignments are dropped, and
// only the kept ones count.
ModelSettings tiny_moe() {
  Config cfg = testing::tiny_config(true);
  cfg.moe.capacity_factor = 1.0;
  return model_settings(cfg);
}

// Each MoE layer's kept assignments per expert, the router's choices taken
// block by block on all `tokens` [B, S] as one batch.
std::vector<torch::Tensor> hand_count(Transformer& model, const torch::Tensor& tokens) {
  torch::NoGradGuard no_grad;
  const int64_t d = model->embedding.size(1);
  torch::Tensor h =
      model->embedding.index_select(0, tokens.reshape(-1)).view({-1, tokens.size(1), d});
  std::vector<torch::Tensor> counts;
  for (auto& layer : *model->layers) {
    BlockImpl* block = layer->as<BlockImpl>();
    const torch::Tensor x = h + block->attn->forward(block->attn_norm->forward(h));
    const RouterOutput route =
        block->moe->router->forward(block->ffn_norm->forward(x).view({-1, d}));
    const torch::Tensor kept = route.kept_ids.reshape(-1);
    counts.push_back(kept.masked_select(kept >= 0).bincount({}, 4));
    ModelOutput scratch;  // the block adds its losses to these
    scratch.aux_loss = scratch.z_loss = torch::zeros({});
    h = block->forward(h, torch::kFloat, scratch);
  }
  return counts;
}

TEST(RoutingAnalysis, CountsMatchAHandCountOfTheRoutersKeptChoices) {
  testing::TempDir dir;
  testing::write_counting_split(dir.str(), "val", 8 * 9 + 1, 30, 1000, 37);
  const ValidationSet val(dir.str(), "val", 8, 0);
  ASSERT_EQ(val.size(), 8);
  Transformer model(tiny_moe());
  const torch::Tensor counts_LE =
      count_routed_assignments(model, val, val.size(), nullptr, torch::kCPU);
  const std::vector<torch::Tensor> hand = hand_count(model, val.windows(0, 8).narrow(1, 0, 8));
  ASSERT_EQ(counts_LE.size(0), 2);
  for (int64_t l = 0; l < 2; ++l) {
    EXPECT_TRUE(torch::equal(counts_LE[l], hand[size_t(l)])) << l << counts_LE << hand[size_t(l)];
    EXPECT_LT(hand[size_t(l)].sum().item<int64_t>(), 8 * 8 * 2) << "no assignment was dropped";
  }
  // The report's shares are those counts over their sum.
  const nlohmann::json report = routing_report({{"a", counts_LE}}, {0, 1}, 2);
  const nlohmann::json& a0 = report["layers"][0]["sets"]["a"];
  const double total = double(hand[0].sum().item<int64_t>());
  for (int64_t e = 0; e < 4; ++e) {
    EXPECT_DOUBLE_EQ(a0["shares"][e].get<double>(), double(hand[0][e].item<int64_t>()) / total);
  }
}

TEST(ExpertDistribution, EntropyAndJensenShannonMatchHandValues) {
  EXPECT_DOUBLE_EQ(entropy_nats({0.25, 0.25, 0.25, 0.25}), std::log(4.0));
  EXPECT_DOUBLE_EQ(entropy_nats({1.0, 0.0}), 0.0);
  EXPECT_DOUBLE_EQ(jensen_shannon_nats({0.1, 0.2, 0.7}, {0.1, 0.2, 0.7}), 0.0);
  EXPECT_NEAR(jensen_shannon_nats({1.0, 0.0}, {0.0, 1.0}), std::log(2.0), 1e-15);
  // m = (0.75, 0.25): (ln(4/3) + (0.5 ln(2/3) + 0.5 ln 2)) / 2.
  const double hand = (std::log(4.0 / 3) + 0.5 * std::log(2.0 / 3) + 0.5 * std::log(2.0)) / 2;
  EXPECT_NEAR(jensen_shannon_nats({1.0, 0.0}, {0.5, 0.5}), hand, 1e-15);
  EXPECT_NEAR(hand, 0.21576155433883568, 1e-15);
  EXPECT_EQ(top_experts({0.1, 0.4, 0.1, 0.4}, 3), (std::vector<int64_t>{1, 3, 0}));
  EXPECT_EQ(shares_of({1, 3, 0}), (std::vector<double>{0.25, 0.75, 0.0}));
}

TEST(RoutingAnalysis, ReportGivesZeroDivergenceForASetAndItsCopy) {
  const torch::Tensor counts_LE = torch::tensor({{3, 1, 0, 4}, {2, 2, 2, 2}}, torch::kLong);
  const torch::Tensor other_LE = torch::tensor({{0, 0, 4, 4}, {2, 2, 2, 2}}, torch::kLong);
  const nlohmann::json report =
      routing_report({{"a", counts_LE}, {"copy", counts_LE.clone()}, {"b", other_LE}}, {1, 3}, 2);
  const nlohmann::json& pairs = report["layers"][0]["jsd"];
  ASSERT_EQ(pairs.size(), 3u);  // (a, copy), (a, b), (copy, b)
  EXPECT_EQ(pairs[0]["sets"], nlohmann::json({"a", "copy"}));
  EXPECT_EQ(pairs[0]["jsd"].get<double>(), 0.0);
  const double layer0 = jensen_shannon_nats({3 / 8.0, 1 / 8.0, 0, 4 / 8.0}, {0, 0, 0.5, 0.5});
  EXPECT_DOUBLE_EQ(pairs[1]["jsd"].get<double>(), layer0);
  EXPECT_EQ(report["layers"][1]["layer"], 3);
  EXPECT_EQ(report["layers"][1]["jsd"][1]["jsd"].get<double>(), 0.0);  // same at layer 3
  EXPECT_DOUBLE_EQ(report["mean_jsd"][1]["jsd"].get<double>(), layer0 / 2);
  EXPECT_EQ(report["layers"][0]["sets"]["a"]["top_experts"], nlohmann::json({3, 0}));
}

}  // namespace
}  // namespace moelab
