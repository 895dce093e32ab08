// The Hugging Face model families moelab reads and writes, one row each of
// hub_families(): what sets a family apart (its architecture name, its config
// keys, its tensor names, the structure it can express). Everything else,
// reading and writing config.json (hf_config.h), naming tensors
// (tensor_names.h) and choosing the family a model is written as
// (export_family below), is one piece of code over the rows. Adding a family
// is adding a row and its tests.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "config/config.h"

namespace moelab {

// How a family says that its attention is windowed (moelab's is full).
enum class WindowKey {
  kNone,    // no such key
  kFlag,    // use_sliding_window = true (Qwen)
  kLength,  // sliding_window < max_position_embeddings (Mistral, Mixtral)
};

struct HubFamily {
  std::string architecture;  // config.json "architectures": "Qwen3MoeForCausalLM"
  std::string model_type;    // config.json "model_type": "qwen3_moe"
  std::string name;          // for messages: "Qwen3-MoE"

  // Attention.
  QkNorm qk_norm = QkNorm::kNone;  // none, per head (Qwen3) or over the projection (OLMoE)
  bool qkv_bias = false;           // q/k/v biases in every checkpoint (Qwen2)
  WindowKey window = WindowKey::kNone;
  std::vector<std::string> refused_keys;  // set (not null) means a computation moelab lacks

  // Feed-forward: a dense family has experts_key empty.
  std::string experts_key;                        // "num_experts" | "num_local_experts"
  std::string expert_width_key;                   // "moe_intermediate_size" | "intermediate_size"
  std::string moe_module;                         // layer L's MoE is model.layers.L.<moe_module>
  std::array<std::string, 3> expert_projections;  // an expert's gate, up, down
  bool gate_key = false;       // norm_topk_prob picks the gate; otherwise top-k renormalised
  bool shared_expert = false;  // a sigmoid-gated shared expert (shared_expert_intermediate_size)
  bool layer_keys = false;     // dense layers among MoE ones (mlp_only_layers, decoder_sparse_step)

  bool moe() const { return !experts_key.empty(); }
};

// Every family, in the order export tries them: the first that expresses a
// model is the one it is written as (a dense model with no biases or QK-norm
// as Llama, an MoE as Mixtral when Mixtral can express it).
const std::vector<HubFamily>& hub_families();

// The family whose architecture a config.json names; InputError naming the
// file and listing the architectures moelab reads otherwise.
const HubFamily& family_of_architecture(const std::string& architecture, const std::string& path);

// What about `cfg` the family cannot express, one phrase each ("moe.capacity_factor
// > 0 (Mixtral drops no tokens)"); empty when it expresses all of it.
std::vector<std::string> inexpressible(const Config& cfg, const HubFamily& family);

// The first family that expresses cfg; otherwise an InputError
// "<checkpoint>: cannot be written as <architecture>: <what>" naming the
// closest family of its kind, dense or MoE (fewest things it cannot
// express; the earlier on a tie), and its first obstacle.
const HubFamily& export_family(const Config& cfg, const std::string& checkpoint);

}  // namespace moelab
