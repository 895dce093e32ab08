#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "config/param_count.h"
#include "util/matmul_peak.h"

namespace moelab {
namespace {

// 2 layers of d_model 8 (2 heads), d_ff 16, over 32 tokens, vocabulary 100.
Config small_dense_config() {
  Config cfg;
  cfg.model.vocab_size = 100;
  cfg.model.d_model = 8;
  cfg.model.n_layers = 2;
  cfg.model.n_heads = 2;
  cfg.model.d_ff = 16;
  cfg.model.seq_len = 32;
  cfg.model.tie_embeddings = false;
  return cfg;
}

TEST(Mfu, DenseFlopsPerTokenByHand) {
  Config cfg = small_dense_config();
  // Per layer: attention 4 * 8 * 8 = 256, SwiGLU 3 * 8 * 16 = 384, 2 norms of 8.
  // Plus the final norm (8) and the head (100 * 8); the embedding is left out.
  const double params = 2 * (256 + 384 + 16) + 8 + 800;
  const double attention = 12.0 * 2 * 32 * 8;
  EXPECT_DOUBLE_EQ(model_flops_per_token(cfg), 6 * params + attention);
  // Tying removes parameters, not the head matmul.
  cfg.model.tie_embeddings = true;
  EXPECT_DOUBLE_EQ(model_flops_per_token(cfg), 6 * params + attention);
  // Heads of their own width (2 x 16 on d_model 8): q, k, v, o become 8 x 32,
  // and the scores span n_heads * head_dim = 32, not d_model.
  cfg.model.explicit_head_dim = 16;
  const double wide_params = params + 2 * (4 * 8 * 32 - 256);
  EXPECT_DOUBLE_EQ(model_flops_per_token(cfg), 6 * wide_params + 12.0 * 2 * 32 * 32);
}

// Latent attention: the scores span n_heads x (qk_nope + qk_rope) dims, the
// weighted sum n_heads x v_head_dim.
TEST(Mfu, LatentAttentionFlopsPerTokenByHand) {
  Config cfg;
  cfg.model.vocab_size = 100;
  cfg.model.d_model = 8;
  cfg.model.n_layers = 1;
  cfg.model.n_heads = 2;
  cfg.model.d_ff = 16;
  cfg.model.seq_len = 32;
  cfg.model.attention = AttentionKind::kMla;
  cfg.model.kv_lora_rank = 4;
  cfg.model.qk_nope_head_dim = 3;
  cfg.model.qk_rope_head_dim = 2;
  cfg.model.v_head_dim = 4;
  // wq 10 x 8, wkv_a 6 x 8, wkv_b 14 x 4, wo 8 x 8; SwiGLU 3 * 8 * 16; norms
  // 2 * 8 and the latent's 4; the final norm 8 and the head 100 * 8.
  const double params = (80 + 48 + 56 + 64) + 384 + 16 + 4 + 8 + 800;
  EXPECT_DOUBLE_EQ(model_flops_per_token(cfg), 6 * params + 6.0 * 1 * 32 * 2 * (5 + 4));
}

TEST(Mfu, MoeCountsOnlyActiveExperts) {
  Config cfg;
  cfg.model.vocab_size = 100;
  cfg.model.d_model = 8;
  cfg.model.n_layers = 1;
  cfg.model.n_heads = 2;
  cfg.model.seq_len = 4;
  cfg.moe.enabled = true;
  cfg.moe.num_experts = 4;
  cfg.moe.top_k = 2;
  cfg.moe.d_expert = 16;
  // attention 256, router 8 * 4, two active experts of 3 * 8 * 16, norms 3 * 8, head 800.
  const double params = 256 + 32 + 2 * 384 + 24 + 800;
  EXPECT_DOUBLE_EQ(model_flops_per_token(cfg), 6 * params + 12.0 * 1 * 4 * 8);
}

TEST(Mfu, EachMtpModuleAddsItsParametersAHeadAndOneLayersScores) {
  Config cfg = small_dense_config();
  const double plain = model_flops_per_token(cfg);
  cfg.train.mtp_depth = 3;
  // A module: 2 norms of 8 and M_k 8 x 16, then a block of attention 256,
  // SwiGLU 384 and 2 norms of 8; its head matmul 100 x 8; one layer's scores.
  const double module = 16 + 128 + 256 + 384 + 16;
  EXPECT_DOUBLE_EQ(model_flops_per_token(cfg), plain + 3 * (6 * (module + 800) + 12.0 * 32 * 8));
}

TEST(Mfu, MeasuredPeakIsPlausible) {
  for (const auto dtype : {torch::kFloat, torch::kBFloat16}) {
    const double peak =
        matmul_peak_flops(dtype, 1, torch::kCPU, /*max_size=*/512, /*seconds_per_size=*/0.05);
    EXPECT_TRUE(std::isfinite(peak));
    // Even one slow core manages 0.1 GFLOP/s; nothing here reaches 100 TFLOP/s.
    EXPECT_GT(peak, 1e8);
    EXPECT_LT(peak, 1e14);
  }
}

// Two tasks of 1 s and 2 s quiet on a fake clock, run in turn for five rounds;
// `seconds(task, round, quiet)` says how long each run takes under the load.
std::vector<double> medians_under(const std::function<double(int, int, double)>& seconds) {
  double now = 0;
  int round = 0;
  const auto task = [&](int index, double quiet) {
    return [&, index, quiet] {
      now += seconds(index, round, quiet);
      if (index == 1) ++round;
    };
  };
  return median_seconds_in_turn({task(0, 1), task(1, 2)}, 5, [&] { return now; });
}

// Load in two rounds of five (a test suite starting beside a run, then
// ending): each task's median is a quiet run.
TEST(MatmulPeak, TasksInTurnKeepTheirQuietTimesUnderLoadThatComesAndGoes) {
  const auto medians = medians_under(
      [](int, int round, double quiet) { return round == 1 || round == 3 ? 10 * quiet : quiet; });
  EXPECT_DOUBLE_EQ(medians[0], 1);
  EXPECT_DOUBLE_EQ(medians[1], 2);
}

// Load from the second round on that slows everything tenfold: the medians
// are slowed alike, and their ratio holds.
TEST(MatmulPeak, TasksInTurnKeepTheirRatioUnderLoadThatStays) {
  const auto medians =
      medians_under([](int, int round, double quiet) { return round >= 1 ? 10 * quiet : quiet; });
  EXPECT_DOUBLE_EQ(medians[1] / medians[0], 2);
}

// Load where the scheduler sets the time (each run waits out 5 s of others'
// work, whatever its own), except one run of the slower task that it spares:
// that task must not look faster than the other (a best time would make it
// 2.5 times as fast).
TEST(MatmulPeak, ALoadThatSparesOneRunDoesNotMakeItsTaskLookFaster) {
  const auto medians = medians_under(
      [](int task, int round, double quiet) { return task == 1 && round == 2 ? quiet : 5.0; });
  EXPECT_DOUBLE_EQ(medians[0], 5);
  EXPECT_DOUBLE_EQ(medians[1], 5);
}

TEST(MatmulPeak, FlopsInTurnArePlausibleForEachDtype) {
  const auto flops = cpu_matmul_flops_in_turn({torch::kBFloat16, torch::kFloat}, 128, 3);
  ASSERT_EQ(flops.size(), 2u);
  for (const double rate : flops) {
    EXPECT_GT(rate, 1e8);
    EXPECT_LT(rate, 1e14);
  }
}

}  // namespace
}  // namespace moelab
