// The whole model's losses and every gradient against the independent Python
// reference (tests/reference/reference_model.py), on the same weights, in double.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "model/transformer.h"
#include "model_test_util.h"

namespace moelab {
namespace {

namespace fs = std::filesystem;

void write_raw(const fs::path& path, const torch::Tensor& t) {
  const auto c = t.contiguous();
  std::ofstream out(path, std::ios::binary);
  out.write(static_cast<const char*>(c.data_ptr()), c.numel() * c.element_size());
}

torch::Tensor read_raw_double(const fs::path& path, at::IntArrayRef shape) {
  auto t = torch::empty(shape, torch::kDouble);
  std::ifstream in(path, std::ios::binary);
  in.read(static_cast<char*>(t.data_ptr()), t.numel() * sizeof(double));
  EXPECT_TRUE(in.good()) << path;
  return t;
}

nlohmann::json rope_scaling_json(const RopeScaling& r) {
  return {{"type", choice_name(r.type)},
          {"factor", r.factor},
          {"original_seq_len", r.original_seq_len},
          {"low_freq_factor", r.low_freq_factor},
          {"high_freq_factor", r.high_freq_factor},
          {"beta_fast", r.beta_fast},
          {"beta_slow", r.beta_slow},
          {"mscale", r.mscale},
          {"mscale_all_dim", r.mscale_all_dim},
          {"attention_factor", r.attention_factor},
          {"truncate", r.truncate}};
}

nlohmann::json config_json(const Config& cfg, int64_t batch, int64_t seq) {
  const auto& m = cfg.model;
  return {{"d_model", m.d_model},
          {"n_layers", m.n_layers},
          {"n_heads", m.n_heads},
          {"n_kv_heads", cfg.model.kv_heads()},
          {"head_dim", m.explicit_head_dim},  // 0: d_model / n_heads
          {"qkv_bias", m.qkv_bias},
          {"rope_theta", m.rope_theta},
          {"rope_scaling", rope_scaling_json(m.rope_scaling)},
          {"norm_eps", m.norm_eps},
          {"tie_embeddings", m.tie_embeddings},
          {"qk_norm", choice_name(m.qk_norm)},
          {"attention", choice_name(m.attention)},
          {"q_lora_rank", m.q_lora_rank},
          {"kv_lora_rank", m.kv_lora_rank},
          {"qk_nope_head_dim", m.qk_nope_head_dim},
          {"qk_rope_head_dim", m.qk_rope_head_dim},
          {"v_head_dim", m.v_head_dim},
          {"batch", batch},
          {"seq", seq},
          {"mtp", {{"depth", cfg.train.mtp_depth}, {"loss_weight", cfg.train.mtp_loss_weight}}},
          {"moe",
           {{"enabled", cfg.moe.enabled},
            {"num_experts", cfg.moe.num_experts},
            {"top_k", cfg.moe.top_k},
            {"shared_width", cfg.moe.shared_width()},
            {"shared_expert_gate", cfg.moe.shared_expert_gate},
            {"gate", choice_name(cfg.moe.gate)},
            {"score", choice_name(cfg.moe.score)},
            {"first_dense_layers", cfg.moe.first_dense_layers},
            {"layer_interval", cfg.moe.layer_interval},
            {"route_scale", cfg.moe.route_scale},
            {"n_groups", cfg.moe.n_groups},
            {"topk_groups", cfg.moe.topk_groups},
            {"group_score", choice_name(cfg.moe.group_score)},
            {"capacity_factor", cfg.moe.capacity_factor},
            {"drop_policy", choice_name(cfg.moe.drop_policy)},
            {"balance", choice_name(cfg.moe.balance)},
            {"aux_loss_coef", cfg.moe.aux_loss_coef},
            {"z_loss_coef", cfg.moe.z_loss_coef}}}};
}

std::string python() {
  const char* env = std::getenv("MOELAB_PYTHON");
  // The interpreter whose torch wheel the build links (CMake's MOELAB_PYTHON).
  return env ? env : MOELAB_TORCH_PYTHON;
}

void expect_matches_reference(const Config& cfg) {
  const int64_t batch = 2, seq = cfg.model.seq_len;
  Transformer model(model_settings(cfg));
  model->to(torch::kDouble);
  {
    // Larger than the 0.02 init so attention and routing are far from uniform;
    // what starts at zero (biases, the shared-expert gate) gets values of its
    // own, so it changes the outputs.
    torch::NoGradGuard no_grad;
    torch::manual_seed(8);
    for (auto& p : model->parameters()) {
      if (p.abs().max().item<double>() == 0.0) {
        p.normal_(0.0, 0.1);
      } else {
        p.mul_(10.0);
      }
    }
  }
  torch::manual_seed(9);
  const auto tokens = torch::randint(0, cfg.model.vocab_size, {batch, seq}, torch::kLong);
  const auto targets = torch::randint(0, cfg.model.vocab_size, {batch, seq}, torch::kLong);

  const fs::path dir =
      fs::temp_directory_path() / ("moelab_reference_" + std::to_string(::getpid()) + "_" +
                                   ::testing::UnitTest::GetInstance()->current_test_info()->name());
  fs::remove_all(dir);
  fs::create_directories(dir / "params");
  nlohmann::json shapes;
  {
    // A routing bias far from zero, so that it changes which experts are chosen.
    torch::NoGradGuard no_grad;
    for (auto& b : model->buffers()) b.copy_(torch::randn(b.sizes(), torch::kDouble));
  }
  // Buffers (the routing biases) travel with the parameters; only the
  // parameters' gradients are compared.
  auto tensors = model->named_weights();
  for (const auto& item : model->named_buffers()) tensors.insert(item.key(), item.value());
  for (const auto& item : tensors) {
    shapes[item.key()] = item.value().sizes().vec();
    write_raw(dir / "params" / item.key(), item.value());
  }
  std::ofstream(dir / "params.json") << shapes.dump();
  std::ofstream(dir / "config.json") << config_json(cfg, batch, seq).dump();
  write_raw(dir / "tokens.bin", tokens);
  write_raw(dir / "targets.bin", targets);

  const std::string cmd =
      python() + " " MOELAB_SOURCE_DIR "/tests/reference/reference_model.py " + dir.string();
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;

  // The loss as training computes it: the head fused with the cross-entropy.
  const auto out = model->forward(tokens, targets);
  const auto& lm = out.lm_loss;
  (lm + out.aux_loss + out.z_loss + out.mtp_loss).backward();
  nlohmann::json ref;
  std::ifstream(dir / "out.json") >> ref;
  EXPECT_NEAR(lm.item<double>(), ref["lm_loss"].get<double>(), 1e-10);
  EXPECT_NEAR(out.aux_loss.item<double>(), ref["aux_loss"].get<double>(), 1e-12);
  EXPECT_NEAR(out.z_loss.item<double>(), ref["z_loss"].get<double>(), 1e-10);
  EXPECT_NEAR(out.mtp_loss.item<double>(), ref["mtp_loss"].get<double>(), 1e-10);
  ASSERT_EQ(int64_t(out.mtp_ce.size()), cfg.train.mtp_depth);
  ASSERT_EQ(ref["mtp_ce"].size(), out.mtp_ce.size());
  for (size_t k = 0; k < out.mtp_ce.size(); ++k) {
    EXPECT_NEAR(out.mtp_ce[k].item<double>(), ref["mtp_ce"][k].get<double>(), 1e-10) << k;
  }
  if (cfg.moe.enabled &&
      (cfg.moe.balance == Balance::kSwitch || cfg.moe.balance == Balance::kSequence)) {
    EXPECT_GT(out.aux_loss.item<double>(), 0.0);
  }
  const auto grads = model->named_weight_grads();
  for (const auto& item : model->named_weights()) {
    const auto expected = read_raw_double(dir / "grads" / item.key(), item.value().sizes());
    const auto& grad = grads[item.key()];
    ASSERT_TRUE(grad.defined()) << item.key();
    const double scale = std::max(expected.abs().max().item<double>(), 1e-8);
    EXPECT_LT((grad - expected).abs().max().item<double>() / scale, 1e-8) << item.key();
  }
  fs::remove_all(dir);
}

TEST(Reference, DenseTiedGroupedQuery) {
  Config cfg = testing::tiny_config(false);
  cfg.model.tie_embeddings = true;
  expect_matches_reference(cfg);
}

TEST(Reference, MoeWithSharedExpertTopkSoftmax) {
  Config cfg = testing::tiny_config(true);
  cfg.model.n_kv_heads = 0;
  cfg.moe.num_shared_experts = 1;
  expect_matches_reference(cfg);
}

TEST(Reference, MoeWithCapacityDropsFullSoftmaxGates) {
  Config cfg = testing::tiny_config(true);
  cfg.moe.gate = Gate::kFullSoftmax;
  cfg.moe.capacity_factor = 0.75;
  expect_matches_reference(cfg);
}

TEST(Reference, MoeSequenceBalanceWithNarrowSharedExpert) {
  Config cfg = testing::tiny_config(true);
  cfg.moe.balance = Balance::kSequence;
  cfg.moe.d_shared = 5;
  expect_matches_reference(cfg);
}

TEST(Reference, MoeAuxFreeBiasSteersTheChoiceOnly) {
  Config cfg = testing::tiny_config(true);
  cfg.moe.balance = Balance::kAuxFree;
  expect_matches_reference(cfg);
}

TEST(Reference, MoeHeterogeneousExpertWidths) {
  Config cfg = testing::tiny_config(true);
  cfg.moe.expert_widths = {20, 4, 12, 8};
  expect_matches_reference(cfg);
}

TEST(Reference, MoeScoreDropsWithoutBalanceLoss) {
  Config cfg = testing::tiny_config(true);
  cfg.moe.balance = Balance::kNone;
  cfg.moe.capacity_factor = 0.75;
  cfg.moe.drop_policy = DropPolicy::kScore;
  expect_matches_reference(cfg);
}

// DeepSeek-V3's router: sigmoid scores, gates normalised over the chosen k and
// scaled, with a Switch loss on the normalised scores.
TEST(Reference, MoeSigmoidScoresWithRouteScale) {
  Config cfg = testing::tiny_config(true);
  cfg.moe.score = Score::kSigmoid;
  cfg.moe.route_scale = 2.5;
  expect_matches_reference(cfg);
}

// Sigmoid scores as they are (no normalisation), the bias shifting the scores.
TEST(Reference, MoeSigmoidScoresAsTheyAreWithAuxFreeBias) {
  Config cfg = testing::tiny_config(true);
  cfg.moe.score = Score::kSigmoid;
  cfg.moe.gate = Gate::kFullSoftmax;
  cfg.moe.balance = Balance::kAuxFree;
  expect_matches_reference(cfg);
}

// Group-limited routing: top_k experts among the best 2 of n_groups groups of
// 2 experts each.
Config group_limited_config(int64_t n_groups, int64_t top_k) {
  Config cfg = testing::tiny_config(true);
  cfg.moe.num_experts = 2 * n_groups;
  cfg.moe.d_expert = 4;
  cfg.moe.top_k = top_k;
  cfg.moe.n_groups = n_groups;
  cfg.moe.topk_groups = 2;
  return cfg;
}

// DeepSeek-V3's: groups by the sum of their two best biased sigmoid scores.
TEST(Reference, MoeGroupLimitedSigmoidWithAuxFreeBias) {
  Config cfg = group_limited_config(4, 2);
  cfg.moe.score = Score::kSigmoid;
  cfg.moe.balance = Balance::kAuxFree;
  expect_matches_reference(cfg);
}

// DeepSeek-V2's: softmax scores, groups by their best, with a Switch loss and
// capacity drops.
TEST(Reference, MoeGroupLimitedSoftmaxByGroupMaxWithCapacity) {
  Config cfg = group_limited_config(3, 3);
  cfg.moe.group_score = GroupScore::kMax;
  cfg.moe.capacity_factor = 0.75;
  expect_matches_reference(cfg);
}

// A mixed stack: the first layer dense (DeepSeek's first_k_dense_replace), then
// every second layer MoE (Qwen's decoder_sparse_step): layers 0 and 1 dense, 2 MoE.
TEST(Reference, DenseLayersAmongMoeLayers) {
  Config cfg = testing::tiny_config(true);
  cfg.model.n_layers = 3;
  cfg.moe.first_dense_layers = 1;
  cfg.moe.layer_interval = 2;
  expect_matches_reference(cfg);
}

// Qwen3's QK-norm: each head normalised over its own dims (grouped-query heads).
TEST(Reference, MoeWithQkNormPerHead) {
  Config cfg = testing::tiny_config(true);
  cfg.model.qk_norm = QkNorm::kHead;
  expect_matches_reference(cfg);
}

// OLMoE's QK-norm: over the whole query and key projections.
TEST(Reference, DenseWithQkNormOverTheWholeProjection) {
  Config cfg = testing::tiny_config(false);
  cfg.model.qk_norm = QkNorm::kFull;
  expect_matches_reference(cfg);
}

// Qwen3's heads: wider than d_model / n_heads (16 / 4 = 4).
TEST(Reference, HeadDimApartFromDModel) {
  Config cfg = testing::tiny_config(false);
  cfg.model.explicit_head_dim = 6;
  expect_matches_reference(cfg);
}

// Qwen2's q, k, v biases.
TEST(Reference, DenseWithQkvBias) {
  Config cfg = testing::tiny_config(false);
  cfg.model.qkv_bias = true;
  expect_matches_reference(cfg);
}

// Qwen2-MoE's shared expert, weighted per token by sigmoid(x . w_g).
TEST(Reference, MoeWithGatedSharedExpert) {
  Config cfg = testing::tiny_config(true);
  cfg.moe.num_shared_experts = 1;
  cfg.moe.shared_expert_gate = true;
  expect_matches_reference(cfg);
}

// Two heads of 8 dims at theta 100 (wavelengths 6.3, 20, 63 and 199), their
// RoPE scaled for a context of 64 by `type`.
Config scaled_two_heads(RopeScalingType type, double factor) {
  Config cfg = testing::tiny_config(false);
  cfg.model.n_heads = 2;
  cfg.model.n_kv_heads = 1;
  cfg.model.rope_theta = 100;
  cfg.model.rope_scaling.type = type;
  cfg.model.rope_scaling.factor = factor;
  cfg.model.rope_scaling.original_seq_len = 64;
  return cfg;
}

// Kept below wavelength 64 / 8, divided above 64 / 1: one pair kept, two
// blended, one divided.
TEST(Reference, DenseWithLlama3RopeScaling) {
  Config cfg = scaled_two_heads(RopeScalingType::kLlama3, 8);
  cfg.model.rope_scaling.high_freq_factor = 8;
  expect_matches_reference(cfg);
}

// YaRN's ramp over all four pairs, not rounded out, and the attention factor
// from mscale and mscale_all_dim.
TEST(Reference, DenseWithYarnRopeScaling) {
  Config cfg = scaled_two_heads(RopeScalingType::kYarn, 4);
  cfg.model.rope_scaling.truncate = false;
  cfg.model.rope_scaling.mscale = 1.0;
  cfg.model.rope_scaling.mscale_all_dim = 0.5;
  expect_matches_reference(cfg);
}

// DeepSeek-V2-Lite's latent attention: full-rank queries, 3 heads whose
// query/key (6 + 4 dims) and value (5) widths differ from d_model / n_heads.
TEST(Reference, MoeWithLatentAttention) {
  Config cfg = testing::tiny_latent_attention_config(true);
  expect_matches_reference(cfg);
}

// DeepSeek-V3's: queries through a normed low-rank latent, and YaRN with
// mscale_all_dim, which scales the softmax as well as the RoPE dims.
TEST(Reference, DenseWithLowRankQueryLatentAttentionAndYarn) {
  Config cfg = testing::tiny_latent_attention_config(false);
  cfg.model.q_lora_rank = 7;
  cfg.model.rope_theta = 100;
  cfg.model.rope_scaling.type = RopeScalingType::kYarn;
  cfg.model.rope_scaling.factor = 4;
  cfg.model.rope_scaling.original_seq_len = 32;
  cfg.model.rope_scaling.mscale = 1.0;
  cfg.model.rope_scaling.mscale_all_dim = 0.7;
  expect_matches_reference(cfg);
}

// Qwen3-MoE's and Qwen2-MoE's options in one model, with YaRN at a set
// attention factor.
TEST(Reference, MoeWithEveryQwenOption) {
  Config cfg = testing::tiny_config(true);
  cfg.model.explicit_head_dim = 6;
  cfg.model.qk_norm = QkNorm::kHead;
  cfg.model.qkv_bias = true;
  cfg.model.rope_theta = 100;
  cfg.model.rope_scaling.type = RopeScalingType::kYarn;
  cfg.model.rope_scaling.factor = 4;
  cfg.model.rope_scaling.original_seq_len = 32;
  cfg.model.rope_scaling.attention_factor = 1.3;
  cfg.moe.num_shared_experts = 1;
  cfg.moe.shared_expert_gate = true;
  expect_matches_reference(cfg);
}

// Multi-token prediction (model/mtp.h) on a dense model: one module, and two
// in sequence, their losses and every gradient (the shared embedding, norm and
// head's included) against the reference's rolled-and-masked formulation.
TEST(Reference, DenseTiedWithOneMtpModule) {
  Config cfg = testing::tiny_config(false);
  cfg.model.tie_embeddings = true;
  cfg.train.mtp_depth = 1;
  cfg.train.mtp_loss_weight = 0.3;
  expect_matches_reference(cfg);
}

// DeepSeek-V3's pair: each MTP module's block attends as the model does, here
// through a latent.
TEST(Reference, MoeWithLatentAttentionAndAnMtpModule) {
  Config cfg = testing::tiny_latent_attention_config(true);
  cfg.train.mtp_depth = 1;
  cfg.train.mtp_loss_weight = 0.3;
  expect_matches_reference(cfg);
}

TEST(Reference, MoeWithTwoMtpModules) {
  Config cfg = testing::tiny_config(true);
  cfg.train.mtp_depth = 2;
  cfg.train.mtp_loss_weight = 0.7;
  expect_matches_reference(cfg);
}

}  // namespace
}  // namespace moelab
