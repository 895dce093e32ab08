// Activation checkpointing changes what is kept, never what is computed: the
// loss, every gradient and the router statistics equal a run without it.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <map>
#include <string>

#include "model/model_test_util.h"
#include "model/transformer.h"

namespace moelab {
namespace {

struct Pass {
  double loss = 0;
  std::map<std::string, torch::Tensor> grads;
  std::vector<MoeLayerStats> stats;
};

Pass forward_backward(Config cfg, moelab::ActivationCheckpointing checkpointing,
                      const torch::Tensor& tokens) {
  cfg.train.activation_checkpointing = checkpointing;
  Transformer model(model_settings(cfg));
  const auto out = model->forward(tokens.narrow(1, 0, cfg.model.seq_len),
                                  tokens.narrow(1, 1, cfg.model.seq_len));
  (out.lm_loss + out.aux_loss + out.z_loss).backward();
  Pass pass{(out.lm_loss + out.aux_loss + out.z_loss).item<double>(), {}, out.moe_stats};
  for (const auto& g : model->named_weight_grads()) {
    pass.grads[g.key()] = g.value().defined() ? g.value().clone() : torch::Tensor();
  }
  return pass;
}

void expect_same_pass(const Pass& plain, const Pass& recomputed) {
  EXPECT_EQ(plain.loss, recomputed.loss);
  for (const auto& [name, grad] : plain.grads) {
    ASSERT_TRUE(grad.defined()) << name;
    const auto& other = recomputed.grads.at(name);
    ASSERT_TRUE(other.defined()) << name << " got no gradient";
    EXPECT_TRUE(torch::allclose(grad, other, 1e-6, 1e-7))
        << name << ": max difference " << (grad - other).abs().max().item<double>();
  }
  ASSERT_EQ(recomputed.stats.size(), plain.stats.size());
  for (size_t l = 0; l < plain.stats.size(); ++l) {
    EXPECT_TRUE(torch::equal(plain.stats[l].load, recomputed.stats[l].load)) << "layer " << l;
  }
}

class ActivationCheckpointing : public ::testing::TestWithParam<moelab::ActivationCheckpointing> {};

TEST_P(ActivationCheckpointing, SameLossGradientsAndStatsAsWithout) {
  // Heads of their own width with biases, scaled RoPE and a gated shared
  // expert: what they compute is recomputed too.
  Config cfg = testing::tiny_qwen2_moe_config();
  cfg.model.explicit_head_dim = 6;
  cfg.model.rope_scaling.type = RopeScalingType::kYarn;
  cfg.model.rope_scaling.factor = 4;
  cfg.model.rope_scaling.original_seq_len = 4;
  const auto tokens = torch::randint(0, cfg.model.vocab_size, {3, cfg.model.seq_len + 1});
  const Pass plain = forward_backward(cfg, moelab::ActivationCheckpointing::kNone, tokens);
  const Pass recomputed = forward_backward(cfg, GetParam(), tokens);
  expect_same_pass(plain, recomputed);
}

// Latent attention with its low-rank query and YaRN's softmax factor: its
// norms and RoPE key are recomputed too.
TEST_P(ActivationCheckpointing, LatentAttentionSameLossAndGradientsAsWithout) {
  Config cfg = testing::tiny_latent_attention_config(true);
  cfg.model.q_lora_rank = 7;
  cfg.model.rope_scaling.type = RopeScalingType::kYarn;
  cfg.model.rope_scaling.factor = 4;
  cfg.model.rope_scaling.original_seq_len = 4;
  cfg.model.rope_scaling.mscale = 1.0;
  cfg.model.rope_scaling.mscale_all_dim = 1.0;
  const auto tokens = torch::randint(0, cfg.model.vocab_size, {3, cfg.model.seq_len + 1});
  const Pass plain = forward_backward(cfg, moelab::ActivationCheckpointing::kNone, tokens);
  const Pass recomputed = forward_backward(cfg, GetParam(), tokens);
  expect_same_pass(plain, recomputed);
}

INSTANTIATE_TEST_SUITE_P(Modes, ActivationCheckpointing,
                         ::testing::Values(moelab::ActivationCheckpointing::kFull,
                                           moelab::ActivationCheckpointing::kMoe));

}  // namespace
}  // namespace moelab
