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

// DeepSeek normalises its latents (q_a_layernorm, kv_a_layernorm) with this
// eps whatever rms_norm_eps says; moelab's latent norms use model.norm_eps,
// so only a model whose norm_eps is this is DeepSeek's.
constexpr double kDeepSeekLatentNormEps = 1e-6;

// How a family weighs the top-k experts it picked.
enum class TopkGate {
  kRenormalised,  // always renormalised to sum to 1 (Mixtral): moe.gate = "topk_softmax"
  kKeyed,         // norm_topk_prob says which (Qwen, OLMoE, DeepSeek-V3)
  kAsScored,      // the scores as they are (DeepSeek-V2: transformers ignores norm_topk_prob)
};

// The always-on experts beside the routed ones.
enum class SharedExperts {
  kNone,
  kGated,    // shared_expert_intermediate_size wide, times sigmoid(shared_expert_gate . x)
             // (Qwen2-MoE)
  kUngated,  // n_shared_experts x moe_intermediate_size wide (DeepSeek: mlp.shared_experts)
};

// How a family says which layers are dense.
enum class DenseLayerKeys {
  kNone,        // every layer MoE
  kSparseStep,  // mlp_only_layers, decoder_sparse_step (Qwen)
  kFirstK,      // the first first_k_dense_replace layers (DeepSeek; moe_layer_freq = 1)
};

// A config.json key whose value the family fixes: another value means a
// computation moelab (or transformers' class) lacks, refused naming `why`.
struct FixedKey {
  std::string key;
  std::string value;  // JSON: "\"sigmoid\"", "1", "false"
  std::string why;
};

struct HubFamily {
  std::string architecture;  // config.json "architectures": "Qwen3MoeForCausalLM"
  std::string model_type;    // config.json "model_type": "qwen3_moe"
  std::string name;          // for messages: "Qwen3-MoE"

  // Attention.
  bool latent_attention = false;    // DeepSeek's MLA (model.attention = "mla")
  bool heads_tile_d_model = false;  // its config class refuses heads that do not (DeepSeek-V2)
  QkNorm qk_norm = QkNorm::kNone;   // none, per head (Qwen3) or over the projection (OLMoE)
  bool qkv_bias = false;            // q/k/v biases in every checkpoint (Qwen2)
  WindowKey window = WindowKey::kNone;
  std::vector<std::string> refused_keys{};  // set (not null) means a computation moelab lacks
  std::vector<FixedKey> fixed_keys{};       // written on export; another value refused on import

  // Feed-forward: a dense family has experts_key empty.
  std::string experts_key{};                        // "num_experts" | "num_local_experts"
  std::string expert_width_key{};                   // "moe_intermediate_size" | "intermediate_size"
  std::string moe_module{};                         // layer L's MoE is model.layers.L.<moe_module>
  std::array<std::string, 3> expert_projections{};  // an expert's gate, up, down
  TopkGate gate = TopkGate::kRenormalised;
  bool norm_topk_default = false;  // kKeyed: what an absent norm_topk_prob means
  SharedExperts shared = SharedExperts::kNone;
  DenseLayerKeys dense_layers = DenseLayerKeys::kNone;

  // Routing (DeepSeek's keys; the other families route by a plain softmax).
  Score score = Score::kSoftmax;
  bool route_scale = false;  // routed_scaling_factor (moe.route_scale)
  bool grouped = false;      // n_group, topk_group (moe.n_groups, topk_groups) scored by:
  GroupScore group_score = GroupScore::kTop2Sum;  // V3: its top-2 sum; V2: its best (max)
  bool routing_bias = false;  // e_score_correction_bias (moe.balance = "aux_free"'s bias)
  bool mtp_key = false;       // num_nextn_predict_layers: DeepSeek-V3's MTP layers (not read)

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
// closest family of its kind, dense or MoE (one of the model's attention
// where there is one, then the fewest things it cannot express, then the
// earlier), and its first obstacle.
const HubFamily& export_family(const Config& cfg, const std::string& checkpoint);

}  // namespace moelab
