// An MoE layer whose experts are all copies of one SwiGLU equals that SwiGLU
// scaled by the sum of the token's k gates: 1 for topk_softmax, the selected
// experts' share of the full softmax for full_softmax.
#include <gtest/gtest.h>

#include "model/local_dispatcher.h"
#include "model/moe_layer.h"
#include "model_test_util.h"

namespace moelab {
namespace {

class IdenticalExperts : public ::testing::TestWithParam<Gate> {};

TEST_P(IdenticalExperts, EqualTheDenseFfnOfThatExpert) {
  torch::manual_seed(6);
  Config cfg = testing::tiny_config(true);
  cfg.moe.gate = GetParam();
  MoeLayer moe(cfg.model.d_model, cfg.moe, std::make_shared<LocalDispatcher>(cfg.moe.num_experts),
               nullptr);
  moe->to(torch::kDouble);
  SwiGLU dense(cfg.model.d_model, cfg.moe.d_expert);
  dense->to(torch::kDouble);
  {
    torch::NoGradGuard no_grad;
    for (auto& p : moe->parameters()) p.normal_(0, 0.3);
    for (auto& p : dense->parameters()) p.normal_(0, 0.3);
    for (size_t e = 0; e < static_cast<size_t>(cfg.moe.num_experts); ++e) {
      auto expert = moe->experts->expert(e);
      expert.w1.copy_(dense->w1);
      expert.w2.copy_(dense->w2);
      expert.w3.copy_(dense->w3);
    }
  }
  const auto x = torch::randn({10, cfg.model.d_model}, torch::kDouble);
  const auto y = moe->forward(x, torch::kDouble).y;
  auto route = moe->router->forward(x);
  const auto gate_sum = route.gates.sum(-1, /*keepdim=*/true);
  if (GetParam() == Gate::kTopkSoftmax) {
    EXPECT_TRUE(torch::allclose(gate_sum, torch::ones_like(gate_sum), 1e-12, 1e-12));
  }
  EXPECT_TRUE(torch::allclose(y, gate_sum * dense->forward(x), 1e-12, 1e-12));
}

INSTANTIATE_TEST_SUITE_P(GateModes, IdenticalExperts,
                         ::testing::Values(Gate::kTopkSoftmax, Gate::kFullSoftmax));

}  // namespace
}  // namespace moelab
