// Hugging Face interop: a moelab model exports as the family that expresses
// it (Llama, Mixtral, Qwen2-MoE, Qwen3-MoE, OLMoE, DeepSeek-V2/V3) and
// transformers computes its logits to 1e-4; tiny random transformers models of each family import
// into moelab giving transformers' logits to 1e-4, and export back to the same
// tensors; what a family cannot express is refused by name. transformers comes
// from launch/requirements.txt; without it these tests fail (hf_test_util.h).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "common/captured_log.h"
#include "common/checkpoint_test_util.h"
#include "common/shared_data.h"
#include "common/temp_dir.h"
#include "data/data_test_util.h"
#include "data/tokenizer.h"
#include "hub/hf_test_util.h"
#include "hub/hf_weights.h"
#include "hub/hub.h"
#include "hub/safetensors.h"
#include "model/model_test_util.h"
#include "util/atomic_file.h"
#include "util/error.h"

namespace moelab {
namespace {

using testing::expect_input_error;
using testing::hf_logits;
using testing::hf_token_ids;
using testing::kPython;
using testing::kReference;
using testing::make_hf_model;
using testing::TempDir;
using testing::transformers_available;

std::string architecture(const std::string& hf_dir) {
  return nlohmann::json::parse(
      read_text_file(hf_dir + "/config.json", "config"))["architectures"][0];
}

// The [model] table of a config's TOML, with its sub-tables: what an import
// must bring back.
std::string to_toml_model(const Config& cfg) {
  const std::string toml = to_toml(cfg);
  const size_t begin = toml.find("[model]");
  size_t end = toml.find("\n[", begin + 1);
  while (end != std::string::npos && toml.compare(end + 1, 7, "[model.") == 0) {
    end = toml.find("\n[", end + 1);
  }
  return toml.substr(begin, end - begin);
}

// Every parameter and buffer (the aux-free routing bias) moved off its
// initial value (norms start at one), so that no mapping mistake hides behind it.
void randomise(Transformer& model) {
  torch::NoGradGuard no_grad;
  for (auto& p : model->parameters()) p.add_(torch::randn_like(p) * 0.3);
  for (auto& b : model->buffers()) b.add_(torch::randn_like(b) * 0.3);
}

struct ExportCase {
  std::string name, architecture;
  std::function<void(Config&)> change;
};

// RoPE scaled as Llama 3.1 does, at a context where a head of 8 has one
// frequency kept, one between the bands and two stretched.
void llama3_scaling(Config& c) {
  c.model.rope_scaling = {RopeScalingType::kLlama3};
  c.model.rope_scaling.factor = 8;
  c.model.rope_scaling.original_seq_len = 64;
}

// YaRN with its attention factor from the scaling factor.
void yarn_scaling(Config& c) {
  c.model.rope_scaling = {RopeScalingType::kYarn};
  c.model.rope_scaling.factor = 4;
  c.model.rope_scaling.original_seq_len = 16;
}

// DeepSeek-V2's structure on moelab's latent attention: the top-k scores as
// they are, groups scored by their best expert, scaled gates, two shared
// experts, a dense first layer, YaRN with both mscales; 4 heads (transformers'
// DeepseekV2Config wants them to divide hidden_size).
void deepseek_v2_shape(Config& c) {
  c.model = testing::tiny_latent_attention_config(true).model;
  c.model.n_heads = 4;
  c.model.n_layers = 3;
  c.model.norm_eps = 1e-6;  // DeepSeek's latent norms' (export_family)
  yarn_scaling(c);
  c.model.rope_scaling.mscale = 0.9;
  c.model.rope_scaling.mscale_all_dim = 0.7;
  c.moe.gate = Gate::kFullSoftmax;
  c.moe.n_groups = 2;
  c.moe.topk_groups = 1;
  c.moe.group_score = GroupScore::kMax;
  c.moe.route_scale = 1.5;
  c.moe.num_shared_experts = 2;
  c.moe.first_dense_layers = 1;
}

// DeepSeek-V3's: a query bottleneck, sigmoid scores renormalised, groups by
// their top-2 sum, the aux-free routing bias, route scale 2.5.
void deepseek_v3_shape(Config& c) {
  deepseek_v2_shape(c);
  c.model.n_heads = 3;  // V3's config takes heads that do not divide hidden_size
  c.model.q_lora_rank = 7;
  c.moe.gate = Gate::kTopkSoftmax;
  c.moe.score = Score::kSigmoid;
  c.moe.group_score = GroupScore::kTop2Sum;
  c.moe.balance = Balance::kAuxFree;
  c.moe.route_scale = 2.5;
  c.moe.num_shared_experts = 1;
}

class HfInterop : public ::testing::TestWithParam<ExportCase> {};

TEST_P(HfInterop, TransformersComputesMoelabsLogits) {
  ASSERT_TRUE(transformers_available())
      << "transformers is not installed for " << kPython
      << " (launch/install-deps.sh installs launch/requirements.txt)";
  TempDir dir;
  const std::string& arch = GetParam().architecture;
  Config cfg = testing::tiny_config(
      /*moe=*/arch != "LlamaForCausalLM" && arch != "Qwen2ForCausalLM" &&
      arch != "Qwen3ForCausalLM");
  cfg.model.n_layers = 3;
  GetParam().change(cfg);
  torch::manual_seed(11);
  Transformer model(model_settings(cfg));
  randomise(model);
  model->eval();
  const std::string ckpt = testing::save_model_checkpoint(dir.str(), 1, model, cfg);
  export_hf(ckpt, dir / "hf");
  EXPECT_EQ(architecture(dir / "hf"), GetParam().architecture);
  const auto tokens = torch::randint(0, cfg.model.vocab_size, {2, cfg.model.seq_len});
  torch::NoGradGuard no_grad;
  const auto ours = model->forward(tokens).logits;
  const auto theirs = hf_logits(dir / "hf", tokens, dir, cfg.model.vocab_size);
  const double diff = (ours - theirs).abs().max().item<double>();
  std::cout << "export " << GetParam().name << ": max |logits difference| = " << diff
            << " (max |logit| " << ours.abs().max().item<double>() << ")\n";
  EXPECT_LE(diff, 1e-4);
}

INSTANTIATE_TEST_SUITE_P(
    Families, HfInterop,
    ::testing::Values(ExportCase{"Llama", "LlamaForCausalLM", [](Config&) {}},
                      ExportCase{"Qwen3HeadNorm", "Qwen3ForCausalLM",
                                 [](Config& c) { c.model.qk_norm = QkNorm::kHead; }},
                      ExportCase{"Qwen2Biases", "Qwen2ForCausalLM",
                                 [](Config& c) { c.model.qkv_bias = true; }},
                      ExportCase{"LlamaLlama3RopeTiedWideHeads", "LlamaForCausalLM",
                                 [](Config& c) {
                                   c.model.tie_embeddings = true;
                                   c.model.explicit_head_dim = 8;
                                   llama3_scaling(c);
                                 }},
                      ExportCase{"Qwen2MoeGatedSharedBiasesYarn", "Qwen2MoeForCausalLM",
                                 [](Config& c) {
                                   c.model.qkv_bias = true;
                                   c.model.explicit_head_dim = 8;
                                   c.moe.num_shared_experts = 1;
                                   c.moe.shared_expert_gate = true;
                                   yarn_scaling(c);
                                 }},
                      ExportCase{"Qwen3MoeWideHeadsYarn", "Qwen3MoeForCausalLM",
                                 [](Config& c) {
                                   c.model.qk_norm = QkNorm::kHead;
                                   c.model.explicit_head_dim = 8;
                                   yarn_scaling(c);
                                 }},
                      ExportCase{"Mixtral", "MixtralForCausalLM",
                                 [](Config& c) { c.model.tie_embeddings = true; }},
                      ExportCase{"Qwen2MoeSharedExpert", "Qwen2MoeForCausalLM",
                                 [](Config& c) { c.moe.num_shared_experts = 2; }},
                      ExportCase{"Qwen2MoeFullSoftmax", "Qwen2MoeForCausalLM",
                                 [](Config& c) { c.moe.gate = Gate::kFullSoftmax; }},
                      ExportCase{"Qwen2MoeSharedFullSoftmaxDenseFirst", "Qwen2MoeForCausalLM",
                                 [](Config& c) {
                                   c.moe.gate = Gate::kFullSoftmax;
                                   c.moe.d_shared = 20;
                                   c.moe.first_dense_layers = 1;
                                 }},
                      ExportCase{"Qwen2MoeDenseFirst", "Qwen2MoeForCausalLM",
                                 [](Config& c) { c.moe.first_dense_layers = 1; }},
                      ExportCase{"Qwen3MoeHeadNorm", "Qwen3MoeForCausalLM",
                                 [](Config& c) { c.model.qk_norm = QkNorm::kHead; }},
                      ExportCase{"Qwen3MoeDenseLayers", "Qwen3MoeForCausalLM",
                                 [](Config& c) {
                                   c.model.qk_norm = QkNorm::kHead;
                                   c.moe.gate = Gate::kFullSoftmax;
                                   c.model.n_layers = 4;
                                   c.moe.first_dense_layers = 1;
                                   c.moe.layer_interval = 2;
                                 }},
                      ExportCase{"OlmoeFullNorm", "OlmoeForCausalLM",
                                 [](Config& c) { c.model.qk_norm = QkNorm::kFull; }},
                      ExportCase{"OlmoeFullSoftmax", "OlmoeForCausalLM",
                                 [](Config& c) {
                                   c.model.qk_norm = QkNorm::kFull;
                                   c.moe.gate = Gate::kFullSoftmax;
                                 }},
                      ExportCase{"DeepSeekV2", "DeepseekV2ForCausalLM", deepseek_v2_shape},
                      ExportCase{"DeepSeekV3", "DeepseekV3ForCausalLM", deepseek_v3_shape},
                      ExportCase{"DeepSeekV3UnbiasedFullGate", "DeepseekV3ForCausalLM",
                                 [](Config& c) {
                                   deepseek_v3_shape(c);
                                   c.moe.balance = Balance::kSwitch;  // a zero bias
                                   c.moe.gate = Gate::kFullSoftmax;
                                   c.moe.num_shared_experts = 0;
                                 }}),
    [](const ::testing::TestParamInfo<ExportCase>& info) { return info.param.name; });

// The parameters and buffers (the routing bias) of an imported checkpoint.
void load_tensors(Transformer& model, const std::map<std::string, torch::Tensor>& tensors) {
  torch::NoGradGuard no_grad;
  for (auto& p : model->named_weights()) p.value().copy_(tensors.at(p.key()));
  for (auto& b : model->named_buffers()) b.value().copy_(tensors.at(b.key()));
}

// config.json keys an import need not bring back: ids, training-only and
// provenance keys, derived ones, and DeepSeek-V3's MTP layers (not imported).
const std::set<std::string> kUnkeptKeys = {"auto_map",
                                           "aux_loss_alpha",
                                           "seq_aux",
                                           "bos_token_id",
                                           "eos_token_id",
                                           "pad_token_id",
                                           "initializer_range",
                                           "use_cache",
                                           "pretraining_tp",
                                           "ep_size",
                                           "transformers_version",
                                           "dtype",
                                           "qk_head_dim",
                                           "num_nextn_predict_layers",
                                           "type"};  // rope_parameters' old name for rope_type

// Every other key of `original` is in `back` with the same value (objects key by key).
void expect_keys_kept(const nlohmann::json& original, const nlohmann::json& back,
                      const std::string& where = "") {
  for (const auto& [key, value] : original.items()) {
    if (kUnkeptKeys.count(key)) continue;
    SCOPED_TRACE(where + key);
    ASSERT_TRUE(back.contains(key)) << "config.json lost " << where << key;
    if (value.is_object()) {
      expect_keys_kept(value, back[key], where + key + ".");
    } else {
      EXPECT_EQ(back[key], value) << where << key;
    }
  }
}

struct ImportCase {
  std::string name, family, options;
  // A published config.json under the shared data (configs/<folder>), made
  // tiny with its structure kept (hf_make_model.py's shrink); "" = the small default.
  std::string published = "";
  // What export writes back: the same architecture, unless an earlier family
  // of hub_families() expresses the model too (a Mistral without a window is
  // a Llama, tensor for tensor).
  std::string exported_as = "";
  // Every structural config.json key comes back (expect_keys_kept).
  bool keys_kept = false;
};

class HfImportFamilies : public ::testing::TestWithParam<ImportCase> {};

// transformers' model in, moelab's logits equal to transformers'; exported
// back, the same tensors (compared as float32: the values a BF16 folder holds).
TEST_P(HfImportFamilies, GivesTransformersLogitsAndExportsBackTheSameTensors) {
  ASSERT_TRUE(transformers_available());
  TempDir dir;
  const auto& c = GetParam();
  std::string options = c.options;
  if (!c.published.empty()) {
    std::string path;
    ASSERT_NO_FATAL_FAILURE(
        testing::shared_data_file("configs/" + c.published + "/config.json", &path));
    options += " config=" + path;
  }
  make_hf_model(c.family, options, dir / "hf");
  const std::string ckpt = import_hf(dir / "hf", dir / "imported");
  const LoadedCheckpoint imported = load_checkpoint(ckpt);
  Config cfg = parse_config(imported.meta.at("config").get<std::string>(), ckpt);
  cfg.train.precision = Precision::kFp32;  // transformers computes in float32 here
  Transformer model(model_settings(cfg));
  model->eval();
  load_tensors(model, imported.tensors);
  // A published context is long; a few positions show RoPE and its scaling.
  const int64_t length = std::min<int64_t>(cfg.model.seq_len, 16);
  const auto tokens = torch::randint(0, cfg.model.vocab_size, {2, length});
  torch::NoGradGuard no_grad;
  const auto ours = model->forward(tokens).logits;
  const auto theirs = hf_logits(dir / "hf", tokens, dir, cfg.model.vocab_size);
  const double diff = (ours - theirs).abs().max().item<double>();
  std::cout << "import " << c.name << ": max |logits difference| = " << diff << "\n";
  EXPECT_LE(diff, 1e-4);

  export_hf(ckpt, dir / "back");
  EXPECT_EQ(architecture(dir / "back"),
            c.exported_as.empty() ? architecture(dir / "hf") : c.exported_as);
  if (c.options.find("fused=1") != std::string::npos) return;  // names differ by design
  const auto original = read_hf_weights(dir / "hf");
  const auto back = read_hf_weights(dir / "back");
  ASSERT_EQ(back.size(), original.size());
  for (const auto& [name, t] : original) {
    ASSERT_TRUE(back.count(name)) << name;
    EXPECT_TRUE(torch::equal(back.at(name), t)) << name;
  }
  if (c.keys_kept) {
    expect_keys_kept(nlohmann::json::parse(read_text_file(dir / "hf/config.json", "config")),
                     nlohmann::json::parse(read_text_file(dir / "back/config.json", "config")));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Families, HfImportFamilies,
    ::testing::Values(
        ImportCase{"Llama", "llama", ""},
        ImportCase{"Mistral", "mistral", "", "", "LlamaForCausalLM"},
        ImportCase{"Qwen2", "qwen2", "tie_word_embeddings=true"},
        ImportCase{"Qwen3ShardedBf16", "qwen3", "shard=1 dtype=bf16"},
        ImportCase{"Mixtral", "mixtral", ""},
        ImportCase{"MixtralShardedBf16", "mixtral", "shard=1 dtype=bf16"},
        ImportCase{"MixtralFused", "mixtral", "fused=1"},
        ImportCase{"Qwen2MoeSharedTopk", "qwen2_moe", "norm_topk_prob=true"},
        ImportCase{"Qwen2MoeSharedFullSoftmax", "qwen2_moe", "norm_topk_prob=false"},
        ImportCase{"Qwen2MoeNoSharedSparseStep", "qwen2_moe",
                   "shared_expert_intermediate_size=0 decoder_sparse_step=2 gate=zero"},
        ImportCase{"Qwen2MoeShardedBf16", "qwen2_moe", "shard=1 dtype=bf16 mlp_only_layers=[0]"},
        ImportCase{"Qwen3MoeDenseFirst", "qwen3_moe", "mlp_only_layers=[0] norm_topk_prob=true"},
        ImportCase{"Qwen3MoeSparseStep", "qwen3_moe",
                   "decoder_sparse_step=2 tie_word_embeddings=true"},
        ImportCase{"Qwen3MoeShardedBf16", "qwen3_moe", "shard=1 dtype=bf16"},
        ImportCase{"Qwen3MoeFusedF16", "qwen3_moe", "fused=1 dtype=f16"},
        ImportCase{"Olmoe", "olmoe", ""}, ImportCase{"OlmoeTopk", "olmoe", "norm_topk_prob=true"},
        ImportCase{"OlmoeShardedBf16", "olmoe", "shard=1 dtype=bf16"},
        // DeepSeek-V3's published structure (tests/reference, at its scale, made
        // tiny): a query bottleneck, 8 groups of which 4 are picked, sigmoid
        // scores with a random routing bias, route scale 2.5, 3 dense layers, a
        // shared expert, YaRN (mscale_all_dim apart from mscale), norm_topk_prob.
        ImportCase{"DeepSeekV3Structured", "deepseek_v3",
                   "config=" + kReference + "deepseek_v3_structured_config.json", "", "", true},
        ImportCase{"DeepSeekV3ShardedBf16", "deepseek_v3", "shard=1 dtype=bf16"},
        ImportCase{"DeepSeekV3Fused", "deepseek_v3", "fused=1"}),
    [](const ::testing::TestParamInfo<ImportCase>& info) { return info.param.name; });

// The published checkpoints' structures (../shared/data/configs): every family
// moelab advertises, as released.
INSTANTIATE_TEST_SUITE_P(
    Published, HfImportFamilies,
    ::testing::Values(
        ImportCase{"Llama32_1B", "llama", "", "unsloth--Llama-3.2-1B"},
        ImportCase{"Qwen25_15B", "qwen2", "", "Qwen--Qwen2.5-1.5B"},
        ImportCase{"Qwen3_06B", "qwen3", "dtype=bf16", "Qwen--Qwen3-0.6B"},
        // Qwen3's documented long-context setting.
        ImportCase{"Qwen3_06B_Yarn", "qwen3",
                   "rope_scaling={\"rope_type\":\"yarn\",\"factor\":4.0,"
                   "\"original_max_position_embeddings\":32768}",
                   "Qwen--Qwen3-0.6B"},
        ImportCase{"Qwen3_30B_A3B", "qwen3_moe", "", "Qwen--Qwen3-30B-A3B"},
        ImportCase{"Qwen15_MoE_A27B", "qwen2_moe", "dtype=bf16",
                   "MaziyarPanahi--Qwen1.5-MoE-A2.7B-Wikihow"},
        ImportCase{"OLMoE_1B_7B", "olmoe", "", "interview-eval--olmoe-math-train-gsm8k-2"},
        ImportCase{"Mixtral_8x7B", "mixtral", "", "mistralai--Mixtral-8x7B-v0.1"},
        // Full-rank queries, YaRN, softmax, two shared experts, greedy.
        ImportCase{"DeepSeekV2Lite", "deepseek_v2", "", "deepseek-ai--DeepSeek-V2-Lite", "", true},
        // The same with V2's groups: 4 of 3 experts, the best 2 picked.
        ImportCase{"DeepSeekV2LiteGroupLimited", "deepseek_v2",
                   "topk_method=\"group_limited_greedy\" n_group=4 topk_group=2",
                   "deepseek-ai--DeepSeek-V2-Lite", "", true}),
    [](const ::testing::TestParamInfo<ImportCase>& info) { return info.param.name; });

// Exported and imported back, a model is the same [model] table (RoPE
// scaling included) and the same tensors.
TEST(HfImport, AnExportComesBackAsTheSameModel) {
  std::vector<Config> configs(5, testing::tiny_config(false));
  configs[1].model.tie_embeddings = true;
  configs[1].model.explicit_head_dim = 8;
  llama3_scaling(configs[1]);
  configs[2] = testing::tiny_config(true);
  configs[2].model.qkv_bias = true;
  configs[2].moe.num_shared_experts = 1;
  configs[2].moe.shared_expert_gate = true;
  yarn_scaling(configs[2]);
  configs[2].model.rope_scaling.mscale = 0.8;
  configs[2].model.rope_scaling.mscale_all_dim = 0.7;
  configs[2].model.rope_scaling.truncate = false;
  configs[3] = configs[4] = testing::tiny_config(true);
  deepseek_v2_shape(configs[3]);
  deepseek_v3_shape(configs[4]);
  for (const Config& cfg : configs) {
    TempDir dir;
    Transformer model(model_settings(cfg));
    model->eval();
    export_hf(testing::save_model_checkpoint(dir.str(), 1, model, cfg), dir / "hf");
    const LoadedCheckpoint imported = load_checkpoint(import_hf(dir / "hf", dir / "imported"));
    const Config back = parse_config(imported.meta.at("config").get<std::string>(), "imported");
    EXPECT_EQ(to_toml_model(back), to_toml_model(cfg));
    for (const auto& p : model->named_weights()) {
      EXPECT_TRUE(torch::equal(imported.tensors.at(p.key()), p.value())) << p.key();
    }
  }
}

// Multi-token prediction modules train beside the model but belong to no
// family: an MTP model exports as the same model without them, the tensors and
// config.json of the model trained without MTP from the same seed.
TEST(HfExport, DropsTheMtpModules) {
  for (const std::string kind : {"dense", "moe", "deepseek_v3"}) {
    SCOPED_TRACE(kind);
    Config plain = testing::tiny_config(kind != "dense");
    if (kind == "deepseek_v3") deepseek_v3_shape(plain);
    Config mtp = plain;
    mtp.train.mtp_depth = 2;
    TempDir dir;
    Transformer with_mtp(model_settings(mtp)), without(model_settings(plain));
    ASSERT_GT(with_mtp->named_weights().size(), without->named_weights().size());
    export_hf(testing::save_model_checkpoint(dir / "mtp", 1, with_mtp, mtp), dir / "hf_mtp");
    export_hf(testing::save_model_checkpoint(dir / "plain", 1, without, plain), dir / "hf_plain");
    const auto exported = read_safetensors(dir / "hf_mtp/model.safetensors");
    const auto expected = read_safetensors(dir / "hf_plain/model.safetensors");
    ASSERT_EQ(exported.size(), expected.size());
    for (const auto& [name, t] : expected) {
      ASSERT_TRUE(exported.count(name)) << name;
      EXPECT_TRUE(torch::equal(exported.at(name), t)) << name;
    }
    EXPECT_EQ(read_text_file(dir / "hf_mtp/config.json", "config"),
              read_text_file(dir / "hf_plain/config.json", "config"));
  }
}

// What moelab cannot express in a source folder is refused, naming the key or tensor.
TEST(HfImport, WhatMoelabCannotExpressIsRefusedByName) {
  ASSERT_TRUE(transformers_available());
  const std::vector<ImportCase> cases = {
      {"shared_expert_gate.weight' is not zero", "qwen2_moe", "shared_expert_intermediate_size=0"},
      {"attention_bias = true", "llama", "attention_bias=true"},
      {"mlp_bias = true", "llama", "mlp_bias=true"},
      {"RoPE scaling type \"linear\"", "llama",
       "rope_scaling={\"rope_type\":\"linear\",\"factor\":2.0}"},
      {"decoder_sparse_step and mlp_only_layers", "qwen2_moe", "mlp_only_layers=[1]"},
      {"clip_qkv", "olmoe", "clip_qkv=8.0"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    TempDir dir;
    make_hf_model(c.family, c.options, dir / "hf");
    expect_input_error([&] { import_hf(dir / "hf", dir / "imported"); }, c.name);
  }
}

// config.json keys transformers will not save as given, set in the file.
void set_config_key(const std::string& hf_dir, const std::string& key,
                    const nlohmann::json& value) {
  auto config = nlohmann::json::parse(read_text_file(hf_dir + "/config.json", "config"));
  config[key] = value;
  write_file_atomically(hf_dir + "/config.json", config.dump(2));
}

// What DeepSeek's configs can say that transformers' classes (or DeepSeek's
// code) compute and moelab does not, each set in the config.json of one tiny
// model of each family.
TEST(HfImport, WhatDeepSeeksConfigsSayAndMoelabCannotIsRefusedByName) {
  ASSERT_TRUE(transformers_available());
  struct Case {
    std::string family, key;
    nlohmann::json value;
    std::string named;
  };
  const nlohmann::json lone_mscale_all_dim = {{"rope_type", "yarn"},
                                              {"factor", 4.0},
                                              {"mscale_all_dim", 0.8},
                                              {"original_max_position_embeddings", 2}};
  const std::vector<Case> cases = {
      {"deepseek_v2", "topk_method", "noaux_tc", "topk_method = \"noaux_tc\""},
      {"deepseek_v2", "scoring_func", "sigmoid", "scoring_func = \"sigmoid\""},
      {"deepseek_v2", "norm_topk_prob", true, "norm_topk_prob = true"},
      {"deepseek_v2", "moe_layer_freq", 2, "moe_layer_freq = 2"},
      {"deepseek_v2", "attention_bias", true, "attention_bias = true"},
      {"deepseek_v3", "scoring_func", "softmax", "scoring_func = \"softmax\""},
      {"deepseek_v3", "topk_method", "greedy", "topk_method = \"greedy\""},
      {"deepseek_v3", "rope_interleave", false, "rope_interleave = false"},
      {"deepseek_v3", "rms_norm_eps", 1e-5, "rms_norm_eps = 1e-05"},
      {"deepseek_v3", "rope_parameters", lone_mscale_all_dim, "one of mscale and mscale_all_dim"},
      {"deepseek_v3", "num_key_value_heads", 2, "num_key_value_heads = 2"},
      {"deepseek_v3",
       "quantization_config",
       {{"quant_method", "fp8"}},
       "quantization_config is set"},
  };
  TempDir dir;
  for (const std::string family : {"deepseek_v2", "deepseek_v3"}) {
    make_hf_model(family, "", dir / family);
  }
  for (const auto& c : cases) {
    SCOPED_TRACE(c.family + " " + c.key);
    TempDir patched;
    std::filesystem::copy(dir / c.family, patched / "hf");
    set_config_key(patched / "hf", c.key, c.value);
    expect_input_error([&] { import_hf(patched / "hf", patched / "imported"); }, c.named);
  }
}

// DeepSeek-V3's multi-token prediction layers (model.layers.N.. past the
// num_hidden_layers N) are left out of an import, with a notice: the model is
// the one transformers computes, and moelab's MTP modules are not
// DeepSeek's (docs/convert.md). A layer past them is still refused.
TEST(HfImport, LeavesOutDeepSeekV3sMtpLayers) {
  ASSERT_TRUE(transformers_available());
  TempDir dir;
  make_hf_model("deepseek_v3", "num_nextn_predict_layers=1", dir / "hf");
  std::filesystem::copy(dir / "hf", dir / "mtp");
  auto tensors = read_safetensors(dir / "hf/model.safetensors");
  const int64_t n_layers = 3, d = 16;
  const std::string mtp = "model.layers." + std::to_string(n_layers) + ".";
  tensors[mtp + "eh_proj.weight"] = torch::randn({d, 2 * d});
  tensors[mtp + "enorm.weight"] = torch::randn({d});
  write_safetensors(dir / "mtp/model.safetensors", tensors, {{"format", "pt"}});
  const auto plain = load_checkpoint(import_hf(dir / "hf", dir / "plain_imported"));
  std::string notice;
  const auto with_mtp = [&] {
    testing::CapturedLog log;
    const auto imported = load_checkpoint(import_hf(dir / "mtp", dir / "mtp_imported"));
    notice = log.text();
    return imported;
  }();
  EXPECT_NE(notice.find("the 1 multi-token prediction layers (model.layers.3.., 2 tensors) are "
                        "not imported"),
            std::string::npos)
      << notice;
  ASSERT_EQ(with_mtp.tensors.size(), plain.tensors.size());
  for (const auto& [name, t] : plain.tensors) {
    EXPECT_TRUE(torch::equal(with_mtp.tensors.at(name), t)) << name;
  }
  set_config_key(dir / "mtp", "num_nextn_predict_layers", 0);
  expect_input_error([&] { import_hf(dir / "mtp", dir / "refused"); }, mtp + "e");
}

// Each thing the chosen family cannot express, alone, is refused by name.
TEST(HfExport, WhatEachFamilyCannotExpressIsRefused) {
  struct Case {
    std::function<void(Config&)> change;
    std::string named;
  };
  const auto shared = [](Config& c) { c.moe.num_shared_experts = 1; };
  const std::vector<Case> cases = {
      {[](Config& c) {
         c.moe.expert_widths = {12, 12, 12, 24};
       },
       "MixtralForCausalLM: moe.expert_widths"},
      {[](Config& c) { c.moe.capacity_factor = 1.25; },
       "MixtralForCausalLM: moe.capacity_factor > 0"},
      {[](Config& c) { c.moe.balance = Balance::kAuxFree; },
       "MixtralForCausalLM: moe.balance = \"aux_free\""},
      {[](Config& c) { c.moe.score = Score::kSigmoid; },
       "MixtralForCausalLM: moe.score = \"sigmoid\""},
      {[](Config& c) { c.moe.route_scale = 2.5; }, "MixtralForCausalLM: moe.route_scale = 2.5"},
      {[](Config& c) { c.moe.n_groups = 2; },
       "MixtralForCausalLM: moe.n_groups = 2 with moe.topk_groups = 1"},
      {[&](Config& c) {
         shared(c);
         c.moe.balance = Balance::kAuxFree;
       },
       "Qwen2MoeForCausalLM: moe.balance = \"aux_free\""},
      {[&](Config& c) {
         c.moe.gate = Gate::kFullSoftmax;
         c.moe.score = Score::kSigmoid;
       },
       "Qwen2MoeForCausalLM: moe.score = \"sigmoid\""},
      {[&](Config& c) {
         c.model.qk_norm = QkNorm::kHead;
         shared(c);
       },
       "Qwen3MoeForCausalLM: shared experts"},
      {[&](Config& c) {
         c.model.qk_norm = QkNorm::kHead;
         c.moe.capacity_factor = 1.0;
       },
       "Qwen3MoeForCausalLM: moe.capacity_factor > 0"},
      {[&](Config& c) {
         c.model.qk_norm = QkNorm::kFull;
         shared(c);
       },
       "OlmoeForCausalLM: shared experts"},
      {[&](Config& c) {
         c.model.qk_norm = QkNorm::kFull;
         c.moe.first_dense_layers = 1;
       },
       "OlmoeForCausalLM: dense layers among the MoE layers"},
      {[&](Config& c) {
         c.model.qk_norm = QkNorm::kFull;
         c.moe.expert_widths = {12, 12, 12, 24};
       },
       "OlmoeForCausalLM: moe.expert_widths"},
      {[](Config& c) {
         c.moe.enabled = false;
         c.model.qk_norm = QkNorm::kFull;
       },
       "LlamaForCausalLM: model.qk_norm = \"full\""},
      {[](Config& c) {
         c.moe.enabled = false;
         c.model.qkv_bias = true;
         c.model.qk_norm = QkNorm::kHead;
       },
       "Qwen2ForCausalLM: model.qk_norm = \"head\""},
      {[](Config& c) {
         c.model.qkv_bias = true;
         c.model.qk_norm = QkNorm::kHead;
       },
       "Qwen3MoeForCausalLM: model.qkv_bias = true"},
      // Latent attention is DeepSeek's, whose MoE must fit too; no dense family has it.
      {[](Config& c) { c.model = testing::tiny_latent_attention_config(true).model; },
       "DeepseekV3ForCausalLM: model.norm_eps = 1e-05"},
      {[](Config& c) {
         deepseek_v2_shape(c);
         c.moe.gate = Gate::kTopkSoftmax;
       },
       "DeepseekV2ForCausalLM: moe.gate = \"topk_softmax\" (DeepSeek-V2 weighs the top-k by "
       "their scores"},
      {[](Config& c) {
         deepseek_v3_shape(c);
         c.model.norm_eps = 1e-5;
       },
       "DeepseekV3ForCausalLM: model.norm_eps = 1e-05 (DeepSeek-V3's latent norms' eps is 1e-06)"},
      {[](Config& c) {
         deepseek_v2_shape(c);
         c.model.n_heads = 3;
       },
       "DeepseekV2ForCausalLM: model.n_heads = 3 does not divide model.d_model = 16"},
      {[](Config& c) {
         deepseek_v2_shape(c);
         c.moe.balance = Balance::kAuxFree;
       },
       "DeepseekV2ForCausalLM: moe.balance = \"aux_free\""},
      {[](Config& c) {
         deepseek_v2_shape(c);
         c.moe.group_score = GroupScore::kTop2Sum;
       },
       "DeepseekV2ForCausalLM: moe.group_score = \"top2_sum\""},
      {[](Config& c) {
         deepseek_v3_shape(c);
         c.moe.group_score = GroupScore::kMax;
       },
       "DeepseekV3ForCausalLM: moe.group_score = \"max\""},
      {[](Config& c) {
         deepseek_v3_shape(c);
         c.moe.layer_interval = 2;
       },
       "DeepseekV3ForCausalLM: moe.layer_interval = 2"},
      {[](Config& c) {
         deepseek_v3_shape(c);
         c.moe.shared_expert_gate = true;
       },
       "DeepseekV3ForCausalLM: moe.shared_expert_gate = true"},
      {[](Config& c) {
         deepseek_v3_shape(c);
         c.moe.d_shared = 20;
       },
       "DeepseekV3ForCausalLM: a shared-expert width of 20"},
      {[](Config& c) {
         deepseek_v3_shape(c);
         c.moe.expert_widths = {12, 12, 12, 24};
       },
       "DeepseekV3ForCausalLM: moe.expert_widths"},
      {[](Config& c) {
         c.moe.enabled = false;
         c.model = testing::tiny_latent_attention_config(false).model;
       },
       "LlamaForCausalLM: model.attention = \"mla\""},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.named);
    TempDir dir;
    Config cfg = testing::tiny_config(true);
    c.change(cfg);
    Transformer model(model_settings(cfg));
    const std::string ckpt = testing::save_model_checkpoint(dir.str(), 1, model, cfg);
    expect_input_error([&] { export_hf(ckpt, dir / "hf"); }, c.named);
    EXPECT_FALSE(std::filesystem::exists(dir / "hf/model.safetensors"));
  }
}

// Texts with what SentencePiece normalises: repeated spaces, tabs, leading
// and trailing blanks, full-width letters, a ligature, accents.
std::vector<std::string> tokenizer_corpus() {
  const std::vector<std::string> words = {"the",  "router", "sends", "tokens", "to",
                                          "each", "expert", "über",  "ﬁne",    "ｔｕｎｅ"};
  const std::vector<std::string> gaps = {" ", "  ", "\t", " \t "};
  std::vector<std::string> texts;
  for (size_t d = 0; d < 120; ++d) {
    std::string text = d % 3 == 0 ? "  " : "";
    for (size_t w = 0; w < 9; ++w) {
      text += words[(d * 7 + w * 3) % words.size()] + gaps[(d + w) % gaps.size()];
    }
    texts.push_back(text);
  }
  return texts;
}

// Exports a tiny model whose dataset (dir/data) was prepared with `tokenizer`
// to dir/hf.
void export_tiny_model_with(const Tokenizer& tokenizer, const TempDir& dir) {
  Config cfg = testing::tiny_config(true);
  cfg.model.vocab_size = tokenizer.vocab_size();
  cfg.data.dir = dir / "data";
  Transformer model(model_settings(cfg));
  export_hf(testing::save_model_checkpoint(dir / "run", 1, model, cfg), dir / "hf");
}

// transformers' AutoTokenizer on dir/hf gives `tokenizer`'s ids for every text
// (less prep's closing EOS).
void expect_exported_tokenizer_gives(const Tokenizer& tokenizer,
                                     const std::vector<std::string>& texts, const TempDir& dir) {
  const auto theirs = hf_token_ids(dir / "hf", texts, dir);
  const auto ours = tokenizer.encode_documents(texts);
  ASSERT_EQ(theirs.size(), ours.size());
  for (size_t i = 0; i < ours.size(); ++i) {
    const std::vector<int64_t> expected(ours[i].begin(), ours[i].end() - 1);  // less EOS
    EXPECT_EQ(theirs[i], expected) << "text " << i << ": '" << texts[i] << "'";
  }
}

// The dataset's SentencePiece model goes next to the weights, and transformers'
// AutoTokenizer gives the ids moelab's prep gives (less prep's closing EOS).
TEST(HfExport, WritesTheDatasetsTokenizerGivingPrepsIds) {
  ASSERT_TRUE(transformers_available());
  TempDir dir;
  const auto texts = tokenizer_corpus();
  TokenizerTrainOptions options;
  options.vocab_size = 80;
  const Tokenizer tokenizer(train_tokenizer(texts, options), "test.model");
  std::filesystem::create_directories(dir / "data");
  write_file_atomically(dir / "data/tokenizer.model", tokenizer.file_bytes());
  export_tiny_model_with(tokenizer, dir);
  ASSERT_TRUE(std::filesystem::exists(dir / "hf/tokenizer_config.json"));
  expect_exported_tokenizer_gives(tokenizer, texts, dir);
}

// A dataset prepared with a Hugging Face tokenizer.json (a Llama-3-style
// byte-level BPE trained by tests/reference/tokenizer_reference.py) exports
// that file, and transformers' fast tokenizer gives prep's ids.
TEST(HfExport, WritesTheDatasetsTokenizerJsonGivingPrepsIds) {
  ASSERT_TRUE(transformers_available());
  TempDir dir;
  const auto texts = tokenizer_corpus();
  const nlohmann::json documents = texts;
  write_file_atomically(dir / "train.json", documents.dump());
  write_file_atomically(dir / "docs.json", documents.dump());
  const std::string cmd =
      kPython + " " + kReference + "tokenizer_reference.py " + dir.str() + " llama3";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const Tokenizer tokenizer = Tokenizer::from_file(dir / "llama3.json");
  tokenizer.save_to_dataset(dir / "data");
  export_tiny_model_with(tokenizer, dir);
  EXPECT_EQ(read_text_file(dir / "hf/tokenizer.json", "exported tokenizer"),
            tokenizer.file_bytes());
  expect_exported_tokenizer_gives(tokenizer, texts, dir);
}

// A dataset of the published Llama 3.1 tokenizer.json, whose template puts
// <|begin_of_text|> in front: AutoTokenizer from the export gives prep's ids
// with that BOS where prep put it (the default) and without it where prep was
// told --no-bos (the export then leaves the template out).
TEST(HfExport, TheTemplatesBosGoesAsPrepUsedIt) {
  ASSERT_TRUE(transformers_available());
  TempDir source;
  ASSERT_NO_FATAL_FAILURE(testing::decompress_shared_data(
      "tokenizers/llama3.1-8b-instruct/tokenizer.json.zst", source / "llama3.json"));
  const auto texts = tokenizer_corpus();
  for (const bool bos : {true, false}) {
    SCOPED_TRACE(bos ? "with the template's BOS" : "--no-bos");
    TempDir dir;
    const Tokenizer tokenizer =
        Tokenizer::from_file(source / "llama3.json").with_special_tokens(bos);
    tokenizer.save_to_dataset(dir / "data");
    export_tiny_model_with(tokenizer, dir);
    expect_exported_tokenizer_gives(tokenizer, texts, dir);
    EXPECT_EQ(tokenizer.encode_documents({"x"})[0][0] == 128000, bos);
  }
}

TEST(Safetensors, RoundTripsAndRefusesATruncatedFile) {
  TempDir dir;
  const std::map<std::string, torch::Tensor> tensors = {
      {"a", torch::randn({3, 5})}, {"b.c", torch::randn({7})}, {"empty", torch::zeros({0, 4})}};
  write_safetensors(dir / "x.safetensors", tensors);
  const auto back = read_safetensors(dir / "x.safetensors");
  ASSERT_EQ(back.size(), 3u);
  EXPECT_TRUE(torch::equal(back.at("a"), tensors.at("a")));
  EXPECT_TRUE(torch::equal(back.at("b.c"), tensors.at("b.c")));
  EXPECT_EQ(back.at("empty").sizes(), tensors.at("empty").sizes());
  std::filesystem::resize_file(dir / "x.safetensors",
                               std::filesystem::file_size(dir / "x.safetensors") - 4);
  EXPECT_THROW(read_safetensors(dir / "x.safetensors"), InputError);
}

}  // namespace
}  // namespace moelab
