#include "train/optimizer.h"
#include "checkpoint/optimizer_state.h"

#include <gtest/gtest.h>

#include "common/optimizer_test_util.h"
#include "model/model_test_util.h"
#include "model/transformer.h"
#include "util/error.h"

namespace moelab {
namespace {

// A tiny model's worth of parameters: a matrix and a norm-like vector.
NamedParams make_params() {
  torch::manual_seed(7);
  return {{"layer.weight", torch::randn({4, 3}).requires_grad_()},
          {"norm.weight", torch::ones({3}).requires_grad_()}};
}

// A deterministic loss whose gradient changes with the step, so moments matter.
void train_step(torch::optim::AdamW& optimizer, const NamedParams& params, int step) {
  optimizer.zero_grad();
  const torch::Tensor x =
      torch::full({2, 4}, 0.1 * (step + 1), torch::dtype(params[0].second.scalar_type()));
  const torch::Tensor y = torch::matmul(x, params[0].second) * params[1].second;
  (y.square().sum() + y.sum()).backward();
  optimizer.step();
}

TEST(Optimizer, DecaysMatricesOnly) {
  const NamedParams params = make_params();
  auto optimizer = make_adamw(params, testing::optimizer_test_config());
  ASSERT_EQ(optimizer->param_groups().size(), 2u);
  const auto& decayed = optimizer->param_groups()[0];
  const auto& plain = optimizer->param_groups()[1];
  EXPECT_TRUE(decayed.params()[0].is_same(params[0].second));
  EXPECT_TRUE(plain.params()[0].is_same(params[1].second));
  EXPECT_DOUBLE_EQ(static_cast<const torch::optim::AdamWOptions&>(decayed.options()).weight_decay(),
                   0.3);
  EXPECT_DOUBLE_EQ(static_cast<const torch::optim::AdamWOptions&>(plain.options()).weight_decay(),
                   0.0);

  // With zero gradients Adam's update is 0, so only decay moves a parameter.
  const torch::Tensor matrix_before = params[0].second.detach().clone();
  const torch::Tensor vector_before = params[1].second.detach().clone();
  for (const auto& [name, p] : params) p.mutable_grad() = torch::zeros_like(p);
  optimizer->step();
  EXPECT_TRUE(torch::allclose(params[0].second, matrix_before * (1 - 0.05 * 0.3)));
  EXPECT_TRUE(torch::equal(params[1].second, vector_before));
}

// The model's parameters by the same rule: q/k/v biases are vectors and go
// undecayed like the norm gains; the shared-expert gate w_g [1, d] is a
// matrix and decays like the router.
TEST(Optimizer, BiasesGoUndecayedAndTheSharedExpertGateDecays) {
  Config cfg = testing::tiny_qwen2_moe_config();
  Transformer model(model_settings(cfg));
  NamedParams params;
  for (const auto& item : model->named_parameters()) params.emplace_back(item.key(), item.value());
  auto optimizer = make_adamw(params, testing::optimizer_test_config());
  const auto in_group = [&](size_t group, const std::string& name) {
    const torch::Tensor& p = model->named_parameters()[name];
    for (const auto& q : optimizer->param_groups()[group].params())
      if (q.is_same(p)) return true;
    return false;
  };
  for (const char* name :
       {"layers.1.attn.bq", "layers.1.attn.bk", "layers.1.attn.bv", "layers.1.attn_norm.weight"}) {
    EXPECT_TRUE(in_group(1, name)) << name;
  }
  for (const char* name : {"layers.1.moe.shared_gate", "layers.1.moe.router.weight"}) {
    EXPECT_TRUE(in_group(0, name)) << name;
  }
}

// The fused kernel against LibTorch's own AdamW, the reference: same groups,
// same decay, same bias corrections, over steps whose gradients change.
TEST(Optimizer, FusedStepMatchesLibTorchAdamW) {
  for (const auto dtype : {torch::kFloat, torch::kDouble}) {
    NamedParams fused = make_params(), reference = testing::clone_params(fused);
    for (auto* params : {&fused, &reference}) {
      for (auto& [name, p] : *params) p = p.detach().to(dtype).requires_grad_();
    }
    auto fused_optimizer = make_adamw(fused, testing::optimizer_test_config());
    ASSERT_NE(dynamic_cast<FusedAdamW*>(fused_optimizer.get()), nullptr);
    const OptimConfig cfg = testing::optimizer_test_config();
    std::vector<torch::optim::OptimizerParamGroup> groups;
    groups.emplace_back(
        std::vector<torch::Tensor>{reference[0].second},
        std::make_unique<torch::optim::AdamWOptions>(torch::optim::AdamWOptions(cfg.lr)
                                                         .betas({cfg.beta1, cfg.beta2})
                                                         .eps(cfg.eps)
                                                         .weight_decay(cfg.weight_decay)));
    groups.emplace_back(
        std::vector<torch::Tensor>{reference[1].second},
        std::make_unique<torch::optim::AdamWOptions>(torch::optim::AdamWOptions(cfg.lr)
                                                         .betas({cfg.beta1, cfg.beta2})
                                                         .eps(cfg.eps)
                                                         .weight_decay(0.0)));
    torch::optim::AdamW reference_optimizer(std::move(groups));
    for (int step = 0; step < 6; ++step) {
      train_step(*fused_optimizer, fused, step);
      train_step(reference_optimizer, reference, step);
    }
    const double tolerance = dtype == torch::kDouble ? 1e-12 : 1e-6;
    for (size_t i = 0; i < fused.size(); ++i) {
      EXPECT_TRUE(torch::allclose(fused[i].second, reference[i].second, tolerance, tolerance))
          << fused[i].first << " " << c10::toString(dtype);
    }
    const auto state = optimizer_state_tensors(*fused_optimizer, fused);
    EXPECT_EQ(state.at("optim/layer.weight/step").item<int64_t>(), 6);
  }
}

TEST(Optimizer, ResumedStateContinuesIdentically) {
  const NamedParams original = make_params();
  auto optimizer = make_adamw(original, testing::optimizer_test_config());
  for (int step = 0; step < 3; ++step) train_step(*optimizer, original, step);

  const auto state = optimizer_state_tensors(*optimizer, original);
  EXPECT_EQ(state.size(), 6u);
  EXPECT_EQ(state.at("optim/layer.weight/step").item<int64_t>(), 3);
  EXPECT_EQ(state.at("optim/norm.weight/exp_avg").sizes(), torch::IntArrayRef({3}));

  const NamedParams resumed = testing::clone_params(original);
  auto fresh = make_adamw(resumed, testing::optimizer_test_config());
  load_optimizer_state(*fresh, resumed, state);

  train_step(*optimizer, original, 3);
  train_step(*fresh, resumed, 3);
  for (size_t i = 0; i < original.size(); ++i) {
    EXPECT_TRUE(torch::equal(original[i].second, resumed[i].second)) << original[i].first;
  }

  // Without the state the same step differs, so the comparison above can fail.
  const NamedParams unresumed = testing::clone_params(resumed);
  auto cold = make_adamw(unresumed, testing::optimizer_test_config());
  train_step(*cold, unresumed, 4);
  train_step(*optimizer, original, 4);
  EXPECT_FALSE(torch::equal(original[0].second, unresumed[0].second));
}

TEST(Optimizer, UnsteppedParametersReportFreshState) {
  const NamedParams params = make_params();
  auto optimizer = make_adamw(params, testing::optimizer_test_config());
  const auto state = optimizer_state_tensors(*optimizer, params);
  EXPECT_EQ(state.at("optim/layer.weight/step").item<int64_t>(), 0);
  EXPECT_TRUE(torch::equal(state.at("optim/layer.weight/exp_avg_sq"), torch::zeros({4, 3})));
}

TEST(Optimizer, MissingOrMisshapedStateNamesTheParameter) {
  const NamedParams params = make_params();
  auto optimizer = make_adamw(params, testing::optimizer_test_config());
  auto state = optimizer_state_tensors(*optimizer, params);
  state.erase("optim/norm.weight/exp_avg_sq");
  try {
    load_optimizer_state(*optimizer, params, state);
    FAIL() << "missing state accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("norm.weight"), std::string::npos) << e.what();
  }
  state["optim/norm.weight/exp_avg_sq"] = torch::zeros({5});
  try {
    load_optimizer_state(*optimizer, params, state);
    FAIL() << "wrong shape accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("optim/norm.weight/exp_avg_sq"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace moelab
