// Autograd gradients of the model's layers against central finite differences,
// in double precision.
#include <gtest/gtest.h>

#include "model/attention.h"
#include "model/local_dispatcher.h"
#include "model/moe_layer.h"
#include "model/rmsnorm.h"
#include "model/rope.h"
#include "model_test_util.h"

namespace moelab {
namespace {

using testing::expect_gradients_match_finite_differences;
using testing::tiny_config;
using testing::weighted_sum;

TEST(GradCheck, RMSNorm) {
  torch::manual_seed(1);
  RMSNorm norm(6, 1e-5);
  norm->to(torch::kDouble);
  // The layers read their weights through members, so a test can swap in a
  // tensor whose gradient it tracks.
  expect_gradients_match_finite_differences({torch::randn({3, 6}), torch::rand({6}) + 0.5},
                                            [&](const std::vector<torch::Tensor>& in) {
                                              norm->weight = in[1];
                                              return weighted_sum(norm->forward(in[0]), 11);
                                            });
}

TEST(GradCheck, Rope) {
  torch::manual_seed(2);
  const auto tables = make_rope_tables(5, 4, 10000.0);
  expect_gradients_match_finite_differences({torch::randn({1, 2, 5, 4})},
                                            [&](const std::vector<torch::Tensor>& in) {
                                              return weighted_sum(apply_rope(in[0], tables), 12);
                                            });
}

TEST(GradCheck, GroupedQueryAttention) {
  torch::manual_seed(3);
  Config cfg = tiny_config(false);
  cfg.model.d_model = 8;
  cfg.model.n_heads = 4;
  cfg.model.n_kv_heads = 2;
  cfg.model.seq_len = 4;
  Attention attn(cfg.model);
  attn->to(torch::kDouble);
  for (auto& p : attn->parameters()) p.data().normal_(0, 0.5);
  expect_gradients_match_finite_differences(
      {torch::randn({1, 4, 8}), attn->wq.detach(), attn->wo.detach()},
      [&](const std::vector<torch::Tensor>& in) {
        attn->wq = in[1];
        attn->wo = in[2];
        return weighted_sum(attn->forward(in[0]), 13);
      });
}

TEST(GradCheck, ExplicitCausalAttentionEqualsTheFusedKernel) {
  // The CPU's path: the mask and scale folded into one baddbmm, in blocks of
  // queries that skip the keys after them (1 block; 2 of 3 and 2 rows; 5 of 1).
  torch::manual_seed(4);
  const auto q = torch::randn({2, 4, 5, 6}, torch::kDouble);
  const auto k = torch::randn({2, 2, 5, 6}, torch::kDouble);
  const auto v = torch::randn({2, 2, 5, 6}, torch::kDouble);
  const auto fused = at::scaled_dot_product_attention(q, k, v, {}, 0.0, /*is_causal=*/true,
                                                      std::nullopt, /*enable_gqa=*/true);
  for (const int64_t blocks : {1, 2, 5}) {
    EXPECT_TRUE(torch::allclose(explicit_causal_attention(q, k, v, blocks), fused, 1e-12, 1e-12))
        << blocks << " query blocks";
    expect_gradients_match_finite_differences(
        {q, k, v}, [blocks](const std::vector<torch::Tensor>& in) {
          return weighted_sum(explicit_causal_attention(in[0], in[1], in[2], blocks), 14);
        });
  }
}

TEST(GradCheck, MoeLayerWithLosses) {
  torch::manual_seed(4);
  Config cfg = tiny_config(true);
  cfg.model.d_model = 6;
  cfg.moe.d_expert = 5;
  cfg.moe.num_experts = 3;
  cfg.moe.num_shared_experts = 1;
  MoeLayer moe(cfg.model.d_model, cfg.moe, std::make_shared<LocalDispatcher>(3), nullptr);
  moe->to(torch::kDouble);
  for (auto& p : moe->parameters()) p.data().normal_(0, 0.5);
  auto experts = moe->experts->stacks().front();  // every expert's w1 and w2
  expect_gradients_match_finite_differences({torch::randn({5, 6}), moe->router->weight.detach(),
                                             experts->w1.detach(), experts->w2.detach()},
                                            [&](const std::vector<torch::Tensor>& in) {
                                              moe->router->weight = in[1];
                                              experts->w1 = in[2];
                                              experts->w2 = in[3];
                                              const auto out = moe->forward(in[0], torch::kDouble);
                                              return weighted_sum(out.y, 14) + out.aux_loss * 10 +
                                                     out.z_loss * 10;
                                            });
}

}  // namespace
}  // namespace moelab
