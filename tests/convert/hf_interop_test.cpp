// Hugging Face interop: an exported dense model loads in transformers as
// LlamaForCausalLM and an MoE as MixtralForCausalLM, both giving moelab's
// logits to 1e-4; a Llama folder imports back to the same model; what Mixtral
// cannot express is refused. transformers comes from launch/requirements.txt;
// without it the transformers tests fail.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "common/temp_dir.h"
#include "convert/convert_test_util.h"
#include "convert/hf_format.h"
#include "convert/safetensors.h"
#include "model/model_test_util.h"
#include "util/error.h"

namespace moelab {
namespace {

using testing::TempDir;

const std::string kPython = MOELAB_TORCH_PYTHON;

// transformers is pinned in launch/requirements.txt, so a missing one is a
// broken install: the tests that need it fail rather than skip.
bool transformers_available() {
  static const bool available =
      std::system((kPython + " -c 'import transformers' >/dev/null 2>&1").c_str()) == 0;
  return available;
}

// transformers' logits for `tokens` from the model folder `hf_dir`.
torch::Tensor hf_logits(const std::string& hf_dir, const torch::Tensor& tokens, const TempDir& dir,
                        int64_t vocab) {
  {
    std::ofstream out(dir / "tokens.txt");
    for (int64_t b = 0; b < tokens.size(0); ++b) {
      for (int64_t s = 0; s < tokens.size(1); ++s) out << tokens[b][s].item<int64_t>() << " ";
      out << "\n";
    }
  }
  const std::string cmd = kPython + " " + MOELAB_SOURCE_DIR + "/tests/reference/hf_logits.py " +
                          hf_dir + " " + (dir / "tokens.txt") + " " + (dir / "logits.bin");
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream in(dir / "logits.bin", std::ios::binary);
  auto logits = torch::empty({tokens.size(0), tokens.size(1), vocab});
  in.read(static_cast<char*>(logits.data_ptr()), std::streamsize(logits.nbytes()));
  EXPECT_TRUE(in.good()) << "short logits file";
  return logits;
}

// The [model] table of a config's TOML: what an import must bring back.
std::string to_toml_model(const Config& cfg) {
  const std::string toml = to_toml(cfg);
  const size_t begin = toml.find("[model]");
  return toml.substr(begin, toml.find("\n[", begin + 1) - begin);
}

class HfInterop : public ::testing::TestWithParam<bool> {};

TEST_P(HfInterop, TransformersComputesMoelabsLogits) {
  ASSERT_TRUE(transformers_available())
      << "transformers is not installed for " << kPython
      << " (launch/install-deps.sh installs launch/requirements.txt)";
  TempDir dir;
  const Config cfg = testing::tiny_config(/*moe=*/GetParam());  // grouped-query heads, 4 experts
  Transformer model(cfg);
  model->eval();
  const std::string ckpt = testing::save_model_checkpoint(dir.str(), 1, model, cfg);
  export_hf(ckpt, dir / "hf");
  const auto tokens = torch::randint(0, cfg.model.vocab_size, {2, cfg.model.seq_len});
  torch::NoGradGuard no_grad;
  const auto ours = model->forward(tokens).logits;
  const auto theirs = hf_logits(dir / "hf", tokens, dir, cfg.model.vocab_size);
  EXPECT_LE((ours - theirs).abs().max().item<double>(), 1e-4);
}

INSTANTIATE_TEST_SUITE_P(DenseAndMoe, HfInterop, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "Mixtral" : "Llama";
                         });

TEST(HfImport, ALlamaFolderComesBackAsTheSameModel) {
  TempDir dir;
  const Config cfg = testing::tiny_config(false);
  Transformer model(cfg);
  model->eval();
  export_hf(testing::save_model_checkpoint(dir.str(), 1, model, cfg), dir / "hf");
  const LoadedCheckpoint imported = load_checkpoint(import_hf(dir / "hf", dir / "imported"));
  const Config back = parse_config(imported.meta.at("config").get<std::string>(), "imported");
  EXPECT_EQ(to_toml_model(back), to_toml_model(cfg));
  for (const auto& p : model->named_weights()) {
    EXPECT_TRUE(torch::equal(imported.tensors.at(p.key()), p.value())) << p.key();
  }
}

// Each of the things Mixtral cannot express, alone, is refused by name.
TEST(HfExport, WhatMixtralCannotExpressIsRefused) {
  struct Case {
    std::function<void(Config&)> change;
    std::string named;
  };
  const std::vector<Case> cases = {
      {[](Config& c) { c.moe.gate = "full_softmax"; }, "moe.gate = \"full_softmax\""},
      {[](Config& c) { c.moe.num_shared_experts = 1; }, "shared experts"},
      {[](Config& c) {
         c.moe.expert_widths = {12, 12, 12, 24};
       },
       "moe.expert_widths"},
      {[](Config& c) { c.moe.capacity_factor = 1.25; }, "moe.capacity_factor > 0"},
      {[](Config& c) { c.moe.balance = "aux_free"; }, "moe.balance = \"aux_free\""},
      {[](Config& c) { c.model.qk_norm = "head"; }, "model.qk_norm = \"head\""},
      {[](Config& c) { c.moe.score = "sigmoid"; }, "moe.score = \"sigmoid\""},
      {[](Config& c) { c.moe.route_scale = 2.5; }, "moe.route_scale = 2.5"},
      {[](Config& c) { c.moe.first_dense_layers = 1; }, "dense layers among the MoE layers"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.named);
    TempDir dir;
    Config cfg = testing::tiny_config(true);
    c.change(cfg);
    Transformer model(cfg);
    const std::string ckpt = testing::save_model_checkpoint(dir.str(), 1, model, cfg);
    try {
      export_hf(ckpt, dir / "hf");
      ADD_FAILURE() << "expected an InputError";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(c.named), std::string::npos) << e.what();
    }
    EXPECT_FALSE(std::filesystem::exists(dir / "hf/model.safetensors"));
  }
}

TEST(Safetensors, RoundTripsAndRefusesATruncatedFile) {
  TempDir dir;
  const std::map<std::string, torch::Tensor> tensors = {{"a", torch::randn({3, 5})},
                                                        {"b.c", torch::randn({7})}};
  write_safetensors(dir / "x.safetensors", tensors);
  const auto back = read_safetensors(dir / "x.safetensors");
  ASSERT_EQ(back.size(), 2u);
  EXPECT_TRUE(torch::equal(back.at("a"), tensors.at("a")));
  EXPECT_TRUE(torch::equal(back.at("b.c"), tensors.at("b.c")));
  std::filesystem::resize_file(dir / "x.safetensors",
                               std::filesystem::file_size(dir / "x.safetensors") - 4);
  EXPECT_THROW(read_safetensors(dir / "x.safetensors"), InputError);
}

}  // namespace
}  // namespace moelab
