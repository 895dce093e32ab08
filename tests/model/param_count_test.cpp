// Analytic parameter counts against the built module, and dense matching.
#include <gtest/gtest.h>

#include "config/load.h"
#include "config/param_count.h"
#include "model/transformer.h"
#include "model_test_util.h"
#include "util/error.h"

namespace moelab {
namespace {

int64_t module_params(const Config& cfg) {
  int64_t n = 0;
  for (const auto& p : Transformer(model_settings(cfg))->parameters()) n += p.numel();
  return n;
}

Config reference_moe() {
  Config cfg;
  cfg.moe.enabled = true;  // d_model 256, 4 layers, 4 heads, vocab 4096, 4 x 512 top-2
  return cfg;
}

TEST(ParamCount, DenseMatchesModule) {
  Config cfg = testing::tiny_config(false);
  EXPECT_EQ(count_params(cfg).total, module_params(cfg));
  cfg.model.tie_embeddings = true;
  const auto counts = count_params(cfg);
  EXPECT_EQ(counts.head, 0);
  EXPECT_EQ(counts.total, module_params(cfg));
  EXPECT_EQ(counts.active, counts.total);
}

TEST(ParamCount, MoeMatchesModuleAndCountsActiveExperts) {
  Config cfg = testing::tiny_config(true);
  cfg.moe.num_shared_experts = 2;
  const auto c = count_params(cfg);
  EXPECT_EQ(c.total, module_params(cfg));
  // 2 layers x 4 experts x 3 matrices of 16 x 12.
  EXPECT_EQ(c.experts_total, 2 * 4 * 3 * 16 * 12);
  EXPECT_EQ(c.experts_active, 2 * 2 * 3 * 16 * 12);
  EXPECT_EQ(c.shared_experts, 2 * 2 * 3 * 16 * 12);
  EXPECT_EQ(c.router, 2 * 16 * 4);
  EXPECT_EQ(c.total - c.active, c.experts_total - c.experts_active);
}

// MTP modules (dense blocks even on an MoE) are counted apart: the model's
// total and active stay those of the model without them.
TEST(ParamCount, MtpModulesAreCountedApartFromTheModel) {
  for (const bool moe : {false, true}) {
    Config cfg = testing::tiny_config(moe);
    cfg.model.qk_norm = QkNorm::kHead;
    const auto plain = count_params(cfg);
    EXPECT_EQ(plain.mtp, 0);
    cfg.train.mtp_depth = 2;
    const auto c = count_params(cfg);
    EXPECT_EQ(c.total, plain.total);
    EXPECT_EQ(c.active, plain.active);
    int64_t mtp = 0;
    for (const auto& p : Transformer(model_settings(cfg))->named_parameters()) {
      if (p.key().rfind("mtp.", 0) == 0) mtp += p.value().numel();
    }
    EXPECT_EQ(c.mtp, mtp);
    EXPECT_EQ(c.total + c.mtp, module_params(cfg));
  }
}

TEST(ParamCount, MixedStacksCountEachLayerAsWhatItIs) {
  Config cfg = testing::tiny_config(true);  // d 16, d_ff 24, 4 experts of 12, top-2
  cfg.model.n_layers = 5;
  cfg.moe.first_dense_layers = 1;
  cfg.moe.layer_interval = 2;  // layers 2 and 4 MoE; 0, 1, 3 dense
  EXPECT_EQ(cfg.moe_layers(), 2);
  const auto c = count_params(cfg);
  EXPECT_EQ(c.total, module_params(cfg));
  EXPECT_EQ(c.dense_ffn, 3 * 3 * 16 * 24);
  EXPECT_EQ(c.experts_total, 2 * 4 * 3 * 16 * 12);
  EXPECT_EQ(c.experts_active, 2 * 2 * 3 * 16 * 12);
  EXPECT_EQ(c.router, 2 * 16 * 4);
}

TEST(ParamCount, QkNormWeightsAreCounted) {
  Config cfg = testing::tiny_config(true);  // 4 query heads, 2 key/value heads of 4 dims
  const int64_t without = count_params(cfg).norms;
  cfg.model.qk_norm = QkNorm::kHead;
  EXPECT_EQ(count_params(cfg).total, module_params(cfg));
  EXPECT_EQ(count_params(cfg).norms - without, 2 * (4 + 4));
  cfg.model.qk_norm = QkNorm::kFull;
  EXPECT_EQ(count_params(cfg).total, module_params(cfg));
  EXPECT_EQ(count_params(cfg).norms - without, 2 * (16 + 8));
}

TEST(ParamCount, ExplicitHeadDimSetsTheProjections) {
  Config cfg = testing::tiny_config(true);  // d 16, 4 query and 2 key/value heads
  cfg.model.explicit_head_dim = 6;
  cfg.model.qk_norm = QkNorm::kHead;
  const auto c = count_params(cfg);
  EXPECT_EQ(c.total, module_params(cfg));
  // q and o: 16 x 24; k and v: 16 x 12, in each of 2 layers.
  EXPECT_EQ(c.attention, 2 * (2 * 16 * 24 + 2 * 16 * 12));
  EXPECT_EQ(c.norms, 5 * 16 + 2 * 2 * 6);
}

TEST(ParamCount, QkvBiasesCountAsAttention) {
  Config cfg = testing::tiny_config(false);  // q 16 wide, k and v 8
  const int64_t without = count_params(cfg).attention;
  cfg.model.qkv_bias = true;
  EXPECT_EQ(count_params(cfg).attention - without, 2 * (16 + 8 + 8));
  EXPECT_EQ(count_params(cfg).total, module_params(cfg));
  cfg.model.explicit_head_dim = 6;  // q 24 wide, k and v 12
  EXPECT_EQ(count_params(cfg).total, module_params(cfg));
}

// Latent attention (3 heads of 6 + 4 query/key dims and 5 value dims, a latent
// of 8 on d_model 16, 2 layers), with and without the low-rank query.
TEST(ParamCount, LatentAttentionByHandAndAgainstTheModule) {
  Config cfg = testing::tiny_latent_attention_config(false);
  cfg.model.q_lora_rank = 7;
  const auto low_rank = count_params(cfg);
  // wq_a 7 x 16, wq_b 30 x 7, wkv_a 12 x 16, wkv_b 33 x 8, wo 16 x 15.
  EXPECT_EQ(low_rank.attention, 2 * (7 * 16 + 30 * 7 + 12 * 16 + 33 * 8 + 16 * 15));
  EXPECT_EQ(low_rank.norms, 5 * 16 + 2 * (7 + 8));  // q_a_norm and kv_a_norm per layer
  EXPECT_EQ(low_rank.total, module_params(cfg));
  cfg.model.q_lora_rank = 0;  // wq 30 x 16
  const auto full_rank = count_params(cfg);
  EXPECT_EQ(full_rank.attention, 2 * (30 * 16 + 12 * 16 + 33 * 8 + 16 * 15));
  EXPECT_EQ(full_rank.norms, 5 * 16 + 2 * 8);
  EXPECT_EQ(full_rank.total, module_params(cfg));
}

TEST(ParamCount, SharedExpertGateCountsWithTheSharedExperts) {
  Config cfg = testing::tiny_config(true);
  cfg.moe.num_shared_experts = 1;
  const auto without = count_params(cfg);
  cfg.moe.shared_expert_gate = true;
  const auto c = count_params(cfg);
  EXPECT_EQ(c.total, module_params(cfg));
  EXPECT_EQ(c.shared_experts - without.shared_experts, 2 * 16);  // w_g [1, d] per MoE layer
  EXPECT_EQ(c.active - without.active, 2 * 16);                  // every token uses it
}

TEST(ParamCount, SharedExpertOfItsOwnWidth) {
  Config cfg = testing::tiny_config(true);
  cfg.moe.d_shared = 5;  // not a multiple of d_expert = 12
  const auto c = count_params(cfg);
  EXPECT_EQ(c.total, module_params(cfg));
  EXPECT_EQ(c.shared_experts, 2 * 3 * 16 * 5);
}

TEST(ParamCount, HeterogeneousExpertsCountTheMeanWidthAsActive) {
  Config cfg = testing::tiny_config(true);
  cfg.moe.expert_widths = {20, 4, 12, 8};  // mean 11, top-2
  const auto c = count_params(cfg);
  EXPECT_EQ(c.total, module_params(cfg));
  EXPECT_EQ(c.experts_total, 2 * 3 * 16 * 44);
  EXPECT_EQ(c.experts_active, 2 * 3 * 16 * 22);
}

TEST(ComputeBudget, BuysTheWholeStepsItPaysFor) {
  Config cfg = testing::tiny_config(true);
  cfg.train.batch_seqs = 4;  // x seq_len 8 = 32 tokens a step
  const double step = model_flops_per_token(cfg) * 32;
  cfg.train.compute_budget = 10.9 * step;
  apply_compute_budget(cfg);
  EXPECT_EQ(cfg.train.max_steps, 10);
  // At the same budget a dense model of the MoE's total size (more FLOPs per
  // token) trains fewer steps.
  Config dense = match_dense(cfg, "total", "d_ff").dense;
  dense.train.compute_budget = cfg.train.compute_budget;
  apply_compute_budget(dense);
  EXPECT_LT(dense.train.max_steps, cfg.train.max_steps);
  EXPECT_EQ(dense.train.max_steps,
            static_cast<int64_t>(cfg.train.compute_budget / (model_flops_per_token(dense) * 32)));
}

TEST(ComputeBudget, UnderOneStepNamesTheKeyAndZeroLeavesMaxSteps) {
  Config cfg = testing::tiny_config(false);
  cfg.train.max_steps = 77;
  apply_compute_budget(cfg);
  EXPECT_EQ(cfg.train.max_steps, 77);
  cfg.train.compute_budget = 1.0;
  try {
    apply_compute_budget(cfg);
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("train.compute_budget = 1 FLOPs is less than one step"),
              std::string::npos)
        << e.what();
  }
}

TEST(MatchMoeTotal, SolvesExpertWidthAtAnActivationRate) {
  Config dense = testing::tiny_config(false);
  dense.model.d_ff = 96;
  const int64_t target = count_params(dense).total;
  for (const auto& [experts, rate] :
       std::vector<std::pair<int64_t, double>>{{4, 0.5}, {8, 0.25}, {16, 0.0625}}) {
    const MatchResult m = match_moe_total(dense, experts, rate, target);
    EXPECT_TRUE(m.dense.moe.enabled);
    EXPECT_EQ(m.dense.moe.num_experts, experts);
    EXPECT_EQ(m.dense.moe.top_k, static_cast<int64_t>(rate * experts));
    EXPECT_EQ(m.dense_total, count_params(m.dense).total);
    EXPECT_EQ(m.dense_total, module_params(m.dense));
    // Within half a width step of the target (3 d layers E per unit of d_expert).
    EXPECT_LE(std::llabs(m.dense_total - target), 3 * 16 * 2 * experts / 2 + 1) << experts;
  }
  EXPECT_THROW(match_moe_total(dense, 8, 0.3, target), InputError);  // 2.4 experts
  EXPECT_THROW(match_moe_total(dense, 8, 0.25, 1000), InputError);   // no room for experts
  // A base with a gated shared expert: the match has neither.
  dense.moe.num_shared_experts = 1;
  dense.moe.shared_expert_gate = true;
  const MatchResult m = match_moe_total(dense, 4, 0.5, target);
  EXPECT_FALSE(m.dense.moe.shared_expert_gate);
  EXPECT_NO_THROW(validate(m.dense));
}

TEST(ParamCount, ReferenceConfigByHand) {
  const auto c = count_params(reference_moe());
  EXPECT_EQ(c.embedding, 4096 * 256);
  EXPECT_EQ(c.attention, 4 * 4 * 256 * 256);
  EXPECT_EQ(c.norms, 9 * 256);
  EXPECT_EQ(c.experts_total, 4 * 4 * 3 * 256 * 512);
  EXPECT_EQ(c.total,
            2 * 4096 * 256 + 4 * 4 * 256 * 256 + 9 * 256 + 4 * 256 * 4 + 4 * 4 * 3 * 256 * 512);
}

TEST(MatchDense, DffWithinHalfPercentForSeveralConfigs) {
  for (int64_t experts : {4, 8, 16}) {
    for (const char* target : {"active", "total"}) {
      Config moe = reference_moe();
      moe.moe.num_experts = experts;
      const auto m = match_dense(moe, target, "d_ff");
      EXPECT_FALSE(m.dense.moe.enabled);
      const auto counts = count_params(moe);
      EXPECT_EQ(m.target, std::string(target) == "active" ? counts.active : counts.total);
      EXPECT_EQ(m.dense_total, count_params(m.dense).total);
      EXPECT_LT(std::abs(m.mismatch), 0.005) << experts << " " << target;
      // No neighbouring width does better.
      for (int64_t delta : {-1, 1}) {
        Config other = m.dense;
        other.model.d_ff += delta;
        EXPECT_GE(std::abs(count_params(other).total - m.target),
                  std::abs(m.dense_total - m.target));
      }
    }
  }
}

TEST(MatchDense, ActiveMatchOfTop2Of4ExpertsIsDffOf1024) {
  // Active MoE = dense with d_ff = k * d_expert plus the router's d * E per layer.
  const auto m = match_dense(reference_moe(), "active", "d_ff");
  EXPECT_EQ(m.dense.model.d_ff, 1024 + 1);  // 4 * 256 * 4 router params ~ 1.33 units of 3*256*4
}

TEST(MatchDense, DmodelKeepsHeadsValidAndIsClosest) {
  Config moe = reference_moe();
  moe.model.n_kv_heads = 2;
  const auto m = match_dense(moe, "total", "d_model");
  EXPECT_EQ(m.dense.model.d_model % (2 * moe.model.n_heads), 0);
  for (int64_t delta : {-8, 8}) {
    Config other = m.dense;
    other.model.d_model += delta;
    EXPECT_GE(std::abs(count_params(other).total - m.target), std::abs(m.dense_total - m.target));
  }
}

// Heads of an explicit width stay as they are; d_model then needs no multiple
// of the heads, so the closest width of all is found.
TEST(MatchDense, DmodelKeepsAnExplicitHeadDim) {
  Config moe = reference_moe();
  moe.model.explicit_head_dim = 128;
  const auto m = match_dense(moe, "total", "d_model");
  EXPECT_EQ(m.dense.model.head_dim(), 128);
  EXPECT_EQ(m.dense_total, count_params(m.dense).total);
  for (int64_t delta : {-1, 1}) {
    Config other = m.dense;
    other.model.d_model += delta;
    EXPECT_GE(std::abs(count_params(other).total - m.target), std::abs(m.dense_total - m.target));
  }
}

// A latent-attention MoE's dense match keeps its attention; its heads' widths
// are their own, so d_model needs no multiple of the heads.
TEST(MatchDense, KeepsLatentAttention) {
  const Config moe = testing::tiny_latent_attention_config(true);
  for (const char* knob : {"d_ff", "d_model"}) {
    SCOPED_TRACE(knob);
    const auto m = match_dense(moe, "total", knob);
    EXPECT_TRUE(m.dense.model.latent_attention());
    EXPECT_EQ(m.dense_total, count_params(m.dense).total);
    EXPECT_EQ(m.dense_total, module_params(m.dense));
    EXPECT_NO_THROW(validate(m.dense));
    for (int64_t delta : {-1, 1}) {
      Config other = m.dense;
      (std::string(knob) == "d_ff" ? other.model.d_ff : other.model.d_model) += delta;
      EXPECT_GE(std::abs(count_params(other).total - m.target), std::abs(m.dense_total - m.target));
    }
  }
}

TEST(MatchDense, RejectsUnknownKnobAndTarget) {
  EXPECT_THROW(match_dense(reference_moe(), "both", "d_ff"), InputError);
  EXPECT_THROW(match_dense(reference_moe(), "active", "n_layers"), InputError);
}

}  // namespace
}  // namespace moelab
