// The Hugging Face model families moelab reads and writes, and their
// config.json. Which family a moelab model is written as follows from what it
// is (export_family); what the chosen family cannot express is refused by name
// (refuse_inexpressible). Reading goes the other way: a config.json's
// architecture names the family, and keys moelab cannot express are refused.
//
//   family      moelab model
//   Llama       dense, no QK-norm
//   Mixtral     MoE, topk_softmax, no shared expert, no QK-norm, every layer MoE
//   Qwen2Moe    MoE without QK-norm otherwise (shared expert, full_softmax,
//               dense layers among the MoE ones)
//   Qwen3Moe    MoE with qk_norm = "head", no shared expert
//   Olmoe       MoE with qk_norm = "full", no shared expert, every layer MoE
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "config/config.h"

namespace moelab {

enum class HfFamily { Llama, Mixtral, Qwen2Moe, Qwen3Moe, Olmoe };

// "LlamaForCausalLM", "MixtralForCausalLM", "Qwen2MoeForCausalLM", ...
std::string hf_architecture(HfFamily family);

// The family a model is written as (see the table above).
HfFamily export_family(const Config& cfg);

// InputError "<checkpoint>: cannot be written as <architecture>: <what>" for
// the first thing about cfg that `family` cannot express.
void refuse_inexpressible(const Config& cfg, HfFamily family, const std::string& checkpoint);

// The config.json of cfg written as `family`.
nlohmann::json hf_config_json(const Config& cfg, HfFamily family);

// The family named by a config.json's "architectures"; InputError otherwise.
HfFamily family_of(const nlohmann::json& j, const std::string& path);

// The moelab model a config.json describes; InputError naming the key for what
// moelab cannot express.
Config config_from_hf(const nlohmann::json& j, HfFamily family, const std::string& path);

}  // namespace moelab
