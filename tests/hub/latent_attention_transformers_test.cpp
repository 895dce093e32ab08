// moelab's latent attention against transformers' DeepseekV3Attention
// (tests/reference/transformers_latent_attention.py) on the same weights, the
// RoPE rows reordered to DeepSeek's interleaved layout as an importer does
// (model/latent_attention.h): the layout claim and the YaRN softmax scale.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "hub/hf_config.h"
#include "model/latent_attention.h"

namespace moelab {
namespace {

namespace fs = std::filesystem;

void write_raw(const fs::path& path, const torch::Tensor& t) {
  const auto c = t.contiguous();
  std::ofstream(path, std::ios::binary)
      .write(static_cast<const char*>(c.data_ptr()), c.numel() * c.element_size());
}

// 3 heads of 6 + 4 query/key and 5 value dims from a latent of 8 on d_model
// 16; YaRN stretching a context of 4 to 16, mscale_all_dim apart from mscale.
ModelConfig deepseek_shaped(int64_t q_lora_rank) {
  ModelConfig m;
  m.d_model = 16;
  m.n_heads = 3;
  m.seq_len = 16;
  m.norm_eps = 1e-6;
  m.attention = AttentionKind::kMla;
  m.q_lora_rank = q_lora_rank;
  m.kv_lora_rank = 8;
  m.qk_nope_head_dim = 6;
  m.qk_rope_head_dim = 4;
  m.v_head_dim = 5;
  m.rope_theta = 100;
  m.rope_scaling.type = RopeScalingType::kYarn;
  m.rope_scaling.factor = 4;
  m.rope_scaling.original_seq_len = 4;
  m.rope_scaling.mscale = 1.0;
  m.rope_scaling.mscale_all_dim = 0.8;
  return m;
}

nlohmann::json deepseek_config(const ModelConfig& m) {
  return {{"hidden_size", m.d_model},
          {"num_attention_heads", m.n_heads},
          {"q_lora_rank", m.q_lora_rank > 0 ? nlohmann::json(m.q_lora_rank) : nlohmann::json()},
          {"kv_lora_rank", m.kv_lora_rank},
          {"qk_nope_head_dim", m.qk_nope_head_dim},
          {"qk_rope_head_dim", m.qk_rope_head_dim},
          {"v_head_dim", m.v_head_dim},
          {"rms_norm_eps", m.norm_eps},
          {"max_position_embeddings", m.seq_len},
          {"rope_parameters", rope_parameters_json(m)}};
}

// transformers' output for attn's weights on x.
torch::Tensor transformers_output(const ModelConfig& m, LatentAttention& attn,
                                  const torch::Tensor& x) {
  const fs::path dir =
      fs::temp_directory_path() / ("moelab_latent_attention_" + std::to_string(::getpid()) + "_" +
                                   std::to_string(m.q_lora_rank));
  fs::remove_all(dir);
  fs::create_directories(dir / "params");
  nlohmann::json shapes;
  for (const auto& item : attn->named_parameters()) {
    shapes[item.key()] = item.value().sizes().vec();
    write_raw(dir / "params" / item.key(), item.value());
  }
  std::ofstream(dir / "params.json") << shapes.dump();
  std::ofstream(dir / "config.json") << deepseek_config(m).dump();
  write_raw(dir / "x.bin", x);
  const std::string cmd =
      std::string(MOELAB_TORCH_PYTHON) +
      " " MOELAB_SOURCE_DIR "/tests/reference/transformers_latent_attention.py " + dir.string();
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  auto y = torch::empty(x.sizes(), torch::kDouble);
  std::ifstream in(dir / "out.bin", std::ios::binary);
  in.read(static_cast<char*>(y.data_ptr()), y.numel() * sizeof(double));
  EXPECT_TRUE(in.good());
  fs::remove_all(dir);
  return y;
}

TEST(LatentAttention, IsTransformersDeepseekV3AttentionWithInterleavedRopeRows) {
  for (int64_t q_lora_rank : {0, 7}) {
    SCOPED_TRACE("q_lora_rank " + std::to_string(q_lora_rank));
    const ModelConfig m = deepseek_shaped(q_lora_rank);
    LatentAttention attn(m);
    attn->to(torch::kDouble);
    torch::manual_seed(3);
    {
      torch::NoGradGuard no_grad;
      for (auto& p : attn->parameters()) p.normal_(0.0, 0.5);
    }
    const auto x = torch::randn({1, m.seq_len, m.d_model}, torch::kDouble);
    const auto expected = transformers_output(m, attn, x);
    torch::NoGradGuard no_grad;
    const auto y = attn->forward(x);
    // transformers' RMSNorm and RoPE tables compute in float32.
    const double scale = expected.abs().max().item<double>();
    EXPECT_LT((y - expected).abs().max().item<double>() / scale, 1e-5);
  }
}

}  // namespace
}  // namespace moelab
