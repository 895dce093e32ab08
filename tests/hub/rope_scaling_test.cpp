// RoPE scaling against transformers' own _compute_llama3_parameters and
// _compute_yarn_parameters (tests/reference/transformers_rope.py), on the
// parameters of published configs as export writes them: row 1 of moelab's tables holds
// m cos(f_i) and m sin(f_i), so each pair's frequency f_i and the attention
// factor m read back from it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "hub/hf_config.h"
#include "model/rope.h"

namespace moelab {
namespace {

namespace fs = std::filesystem;

struct RopeCase {
  const char* name;
  int64_t head_dim;
  double theta;
  int64_t max_position_embeddings;
  RopeScaling scaling;
};

RopeScaling llama3(double factor, int64_t original, double low, double high) {
  RopeScaling r;
  r.type = RopeScalingType::kLlama3;
  r.factor = factor;
  r.original_seq_len = original;
  r.low_freq_factor = low;
  r.high_freq_factor = high;
  return r;
}

RopeScaling yarn(double factor, int64_t original) {
  RopeScaling r;
  r.type = RopeScalingType::kYarn;
  r.factor = factor;
  r.original_seq_len = original;
  return r;
}

std::vector<RopeCase> cases() {
  RopeScaling deepseek = yarn(40, 4096);  // DeepSeek-V2-Lite's config.json
  deepseek.mscale = deepseek.mscale_all_dim = 0.707;
  RopeScaling uneven = yarn(4, 32768);
  uneven.mscale = 1.0;
  uneven.mscale_all_dim = 0.5;
  uneven.beta_fast = 16;
  uneven.beta_slow = 2;
  RopeScaling unrounded = yarn(8, 2048);
  unrounded.truncate = false;
  unrounded.attention_factor = 1.25;
  return {
      {"llama3_2_1b", 64, 500000, 131072, llama3(32, 8192, 1, 4)},  // Llama-3.2-1B's
      {"llama3_1_8b", 128, 500000, 131072, llama3(8, 8192, 1, 4)},  // Llama-3.1-8B's
      {"deepseek_v2_lite", 64, 10000, 163840, deepseek},
      {"qwen_yarn", 128, 1000000, 131072, yarn(4, 32768)},  // Qwen3's long-context recipe
      {"yarn_uneven_mscales_and_betas", 64, 10000, 131072, uneven},
      {"yarn_unrounded_set_factor", 32, 10000, 16384, unrounded},
  };
}

// The case as config.json's rope_parameters, written as `moelab export` writes them.
nlohmann::json transformers_parameters(const RopeCase& c) {
  ModelConfig m;
  m.rope_theta = c.theta;
  m.rope_scaling = c.scaling;
  return rope_parameters_json(m);
}

TEST(RopeScaling, FrequenciesAndAttentionFactorAreTransformers) {
  const auto all = cases();
  nlohmann::json request = nlohmann::json::array();
  for (const auto& c : all) {
    request.push_back({{"head_dim", c.head_dim},
                       {"max_position_embeddings", c.max_position_embeddings},
                       {"rope_parameters", transformers_parameters(c)}});
  }
  const fs::path dir =
      fs::temp_directory_path() / ("moelab_rope_scaling_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "cases.json") << request.dump();
  const std::string cmd = std::string(MOELAB_TORCH_PYTHON) +
                          " " MOELAB_SOURCE_DIR "/tests/reference/transformers_rope.py " +
                          (dir / "cases.json").string() + " " + (dir / "out.json").string();
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  nlohmann::json reference;
  std::ifstream(dir / "out.json") >> reference;
  fs::remove_all(dir);

  ASSERT_EQ(reference.size(), all.size());
  for (size_t i = 0; i < all.size(); ++i) {
    const RopeCase& c = all[i];
    SCOPED_TRACE(c.name);
    const auto tables = make_rope_tables(2, c.head_dim, c.theta, c.scaling);
    const auto half = c.head_dim / 2;
    const auto cos = tables.cos[1].slice(0, 0, half), sin = tables.sin[1].slice(0, 0, half);
    const auto frequency = torch::atan2(sin, cos), factor = torch::hypot(cos, sin);
    const auto& expected = reference[i]["inv_freq"];
    ASSERT_EQ(int64_t(expected.size()), half);
    for (int64_t p = 0; p < half; ++p) {
      // transformers computes the frequencies in float32.
      const double want = expected[size_t(p)].get<double>();
      EXPECT_NEAR(frequency[p].item<double>(), want, 1e-6 * want) << "pair " << p;
      EXPECT_NEAR(factor[p].item<double>(), reference[i]["attention_factor"].get<double>(), 1e-12)
          << "pair " << p;
    }
  }
}

// The scalings stretch what they should: llama3 keeps the fastest pair and
// divides the slowest by the factor; yarn's attention factor is 0.1 ln(s) + 1.
TEST(RopeScaling, Llama3KeepsFastPairsAndSlowsSlowOnes) {
  const auto plain = make_rope_tables(2, 64, 500000);
  const auto scaled = make_rope_tables(2, 64, 500000, llama3(32, 8192, 1, 4));
  const auto f_plain = torch::atan2(plain.sin[1], plain.cos[1]);
  const auto f_scaled = torch::atan2(scaled.sin[1], scaled.cos[1]);
  EXPECT_DOUBLE_EQ(f_scaled[0].item<double>(), f_plain[0].item<double>());
  EXPECT_NEAR(f_scaled[31].item<double>(), f_plain[31].item<double>() / 32, 1e-15);
  const auto yarn_tables = make_rope_tables(2, 64, 10000, yarn(4, 4096));
  EXPECT_NEAR(torch::hypot(yarn_tables.cos[0], yarn_tables.sin[0])[0].item<double>(),
              0.1 * std::log(4.0) + 1, 1e-15);
}

}  // namespace
}  // namespace moelab
