// Initialisation is keyed by (seed, parameter name): reproducible, and the
// experts a rank holds get the same weights whatever else it holds.
#include <gtest/gtest.h>

#include <cmath>

#include "model/compute.h"
#include "model/transformer.h"
#include "model_test_util.h"
#include "util/error.h"

namespace moelab {
namespace {

using testing::HoldsExperts;

TEST(Init, SameSeedSameWeightsOtherSeedOtherWeights) {
  const Config cfg = testing::tiny_config(true);
  auto a = Transformer(model_settings(cfg))->named_weights();
  auto b = Transformer(model_settings(cfg))->named_weights();
  Config other = cfg;
  other.train.seed += 1;
  auto c = Transformer(model_settings(other))->named_weights();
  for (const auto& item : a) {
    EXPECT_TRUE(torch::equal(item.value(), b[item.key()])) << item.key();
    if (item.key().find("norm") == std::string::npos) {
      EXPECT_FALSE(torch::equal(item.value(), c[item.key()])) << item.key();
    }
  }
}

TEST(Init, ExpertWeightsIndependentOfWhichExpertsARankHolds) {
  const Config cfg = testing::tiny_config(true);
  auto full = Transformer(model_settings(cfg))->named_weights();
  MoeContext odd_rank;
  odd_rank.make_dispatcher = [](int64_t) {
    return std::make_shared<HoldsExperts>(std::vector<int64_t>{1, 3});
  };
  Transformer partial(model_settings(cfg), odd_rank);
  int64_t expert_params = 0;
  for (const auto& item : partial->named_weights()) {
    ASSERT_TRUE(full.contains(item.key())) << item.key();
    EXPECT_TRUE(torch::equal(item.value(), full[item.key()])) << item.key();
    if (partial->is_expert_parameter(item.key())) {
      ++expert_params;
      EXPECT_TRUE(item.key().find("experts.1.") != std::string::npos ||
                  item.key().find("experts.3.") != std::string::npos)
          << item.key();
    }
  }
  EXPECT_EQ(expert_params, 2 /*layers*/ * 2 /*experts*/ * 3 /*matrices*/);
  EXPECT_TRUE(full.contains("layers.1.moe.experts.3.w2"));
}

// Experts are stacked, but each expert's rows are drawn from its own name, so
// a run starts from the same weights as one that keeps a tensor per expert.
TEST(Init, EveryExpertRowIsDrawnFromItsOwnName) {
  const Config cfg = testing::tiny_config(true);
  Transformer model(model_settings(cfg));
  const auto weights = model->named_weights();
  const double out_std = cfg.model.scaled_residual_init
                             ? cfg.model.init_std / std::sqrt(2.0 * cfg.model.n_layers)
                             : cfg.model.init_std;
  for (const auto& [name, std] : std::vector<std::pair<std::string, double>>{
           {"layers.0.moe.experts.0.w1", cfg.model.init_std},
           {"layers.1.moe.experts.3.w2", out_std},
           {"layers.1.moe.experts.2.w3", cfg.model.init_std}}) {
    torch::Tensor expected = torch::empty(weights[name].sizes());
    init_normal_keyed(expected, cfg.train.seed, name, std);
    EXPECT_TRUE(torch::equal(weights[name], expected)) << name;
  }
}

TEST(Init, StdAndScaledResidualProjections) {
  Config cfg = testing::tiny_config(false);
  cfg.model.d_model = 64;
  cfg.model.d_ff = 256;
  cfg.model.vocab_size = 512;
  Transformer model(model_settings(cfg));
  auto params = model->named_weights();
  const double out_std = cfg.model.init_std / std::sqrt(2.0 * cfg.model.n_layers);
  EXPECT_NEAR(params["embedding"].std().item<double>(), cfg.model.init_std, 0.001);
  EXPECT_NEAR(params["layers.0.ffn.w1"].std().item<double>(), cfg.model.init_std, 0.001);
  EXPECT_NEAR(params["layers.0.ffn.w2"].std().item<double>(), out_std, 0.0007);
  EXPECT_NEAR(params["layers.1.attn.wo"].std().item<double>(), out_std, 0.0007);
  EXPECT_TRUE(torch::equal(params["final_norm.weight"], torch::ones({64})));
  // Different names draw different numbers.
  EXPECT_FALSE(torch::equal(params["layers.0.attn.wq"], params["layers.1.attn.wq"]));
}

// A bias starts as none and the shared expert's gate at sigmoid(0) = 1/2.
TEST(Init, BiasesAndTheSharedExpertGateStartAtZero) {
  Config cfg = testing::tiny_qwen2_moe_config();
  auto params = Transformer(model_settings(cfg))->named_weights();
  for (const auto& [name, shape] : std::vector<std::pair<std::string, std::vector<int64_t>>>{
           {"layers.0.attn.bq", {16}},
           {"layers.1.attn.bk", {8}},
           {"layers.1.attn.bv", {8}},
           {"layers.1.moe.shared_gate", {1, 16}}}) {
    ASSERT_TRUE(params.contains(name)) << name;
    EXPECT_TRUE(torch::equal(params[name], torch::zeros(shape))) << name;
  }
}

TEST(Init, TiedHeadIsTheEmbedding) {
  Config cfg = testing::tiny_config(false);
  cfg.model.tie_embeddings = true;
  Transformer model(model_settings(cfg));
  EXPECT_FALSE(model->named_parameters().contains("head"));
  EXPECT_TRUE(model->head.is_same(model->embedding));
}

TEST(Model, Bf16ForwardStaysCloseToFp32AndKeepsFp32Grads) {
  // Biases (added in the bf16 GEMM) and the gate (its logit in fp32) too.
  Config cfg = testing::tiny_qwen2_moe_config();
  Transformer fp32(model_settings(cfg));
  cfg.train.precision = Precision::kBf16;
  Transformer bf16(model_settings(cfg));
  const auto tokens = torch::randint(0, cfg.model.vocab_size, {2, 8}, torch::kLong);
  const auto a = fp32->forward(tokens, tokens).lm_loss;
  EXPECT_EQ(bf16->forward(tokens).logits.scalar_type(), torch::kBFloat16);
  const auto out = bf16->forward(tokens, tokens);
  const auto& b = out.lm_loss;
  EXPECT_EQ(b.scalar_type(), torch::kFloat32);
  EXPECT_NEAR(a.item<double>(), b.item<double>(), 0.02);
  (b + out.aux_loss + out.z_loss).backward();
  for (const auto& p : bf16->parameters()) {
    ASSERT_TRUE(p.grad().defined());
    EXPECT_EQ(p.grad().scalar_type(), torch::kFloat32);
  }
}

TEST(Model, RejectsSequencesLongerThanConfigured) {
  Transformer model(model_settings(testing::tiny_config(false)));
  EXPECT_THROW(model->forward(torch::zeros({1, 9}, torch::kLong)), InputError);
}

}  // namespace
}  // namespace moelab
