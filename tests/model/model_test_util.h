// Small configs and a finite-difference gradient check shared by the model tests.
#pragma once

#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <functional>
#include <vector>

#include "config/config.h"
#include "model/token_dispatcher.h"

namespace moelab::testing {

// A dispatcher stand-in that only says which experts this "rank" holds, as a
// rank of an expert-parallel group does.
class HoldsExperts : public TokenDispatcher {
 public:
  explicit HoldsExperts(std::vector<int64_t> ids) : ids_(std::move(ids)) {}
  DispatchedTokens dispatch(const torch::Tensor&, const torch::Tensor&) override { return {}; }
  torch::Tensor combine(const torch::Tensor&, const torch::Tensor&) override { return {}; }
  std::vector<int64_t> local_expert_ids() const override { return ids_; }

 private:
  std::vector<int64_t> ids_;
};

// A model small enough for double-precision gradient checks.
inline Config tiny_config(bool moe) {
  Config cfg;
  cfg.model.vocab_size = 37;
  cfg.model.d_model = 16;
  cfg.model.n_layers = 2;
  cfg.model.n_heads = 4;
  cfg.model.n_kv_heads = 2;
  cfg.model.d_ff = 24;
  cfg.model.seq_len = 8;
  cfg.train.precision = Precision::kFp32;
  cfg.train.seed = 7;
  cfg.moe.enabled = moe;
  cfg.moe.num_experts = 4;
  cfg.moe.top_k = 2;
  cfg.moe.d_expert = 12;
  cfg.moe.aux_loss_coef = 0.1;
  cfg.moe.z_loss_coef = 0.01;
  return cfg;
}

// tiny_config with multi-head latent attention (DeepSeek-V2-Lite's shape:
// full-rank queries): 3 heads of 6 + 4 query/key dims and 5 value dims from a
// latent of 8.
inline Config tiny_latent_attention_config(bool moe) {
  Config cfg = tiny_config(moe);
  cfg.model.attention = AttentionKind::kMla;
  cfg.model.n_heads = 3;
  cfg.model.n_kv_heads = 0;
  cfg.model.kv_lora_rank = 8;
  cfg.model.qk_nope_head_dim = 6;
  cfg.model.qk_rope_head_dim = 4;
  cfg.model.v_head_dim = 5;
  return cfg;
}

// tiny_config(true) with Qwen2-MoE's options: q/k/v biases and one shared
// expert, gated.
inline Config tiny_qwen2_moe_config() {
  Config cfg = tiny_config(true);
  cfg.model.qkv_bias = true;
  cfg.moe.num_shared_experts = 1;
  cfg.moe.shared_expert_gate = true;
  return cfg;
}

// Compares d(loss)/d(input) from autograd with central differences for every
// element of every input (double precision; keep the inputs small).
inline void expect_gradients_match_finite_differences(
    std::vector<torch::Tensor> inputs,
    const std::function<torch::Tensor(const std::vector<torch::Tensor>&)>& loss_fn,
    double step = 1e-6, double tolerance = 1e-6) {
  for (auto& t : inputs) t = t.detach().to(torch::kDouble).requires_grad_(true);
  loss_fn(inputs).backward();
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto analytic = inputs[i].grad().reshape(-1);
    auto flat = inputs[i].detach().reshape(-1);  // shares storage with inputs[i]
    for (int64_t j = 0; j < flat.numel(); ++j) {
      torch::NoGradGuard no_grad;
      const double original = flat[j].item<double>();
      flat[j] = original + step;
      const double up = loss_fn(inputs).item<double>();
      flat[j] = original - step;
      const double down = loss_fn(inputs).item<double>();
      flat[j] = original;
      const double numeric = (up - down) / (2 * step);
      const double exact = analytic[j].item<double>();
      ASSERT_NEAR(exact, numeric, tolerance * std::max(1.0, std::abs(numeric)))
          << "input " << i << " element " << j;
    }
  }
}

// A fixed random weighting that turns a tensor output into a scalar loss.
inline torch::Tensor weighted_sum(const torch::Tensor& out, int64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(seed));
  const auto weights = torch::randn(out.sizes(), gen, torch::TensorOptions().dtype(torch::kDouble));
  return (out.to(torch::kDouble) * weights).sum();
}

}  // namespace moelab::testing
