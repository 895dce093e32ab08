// config_from_hf (hf_config.h): a Hugging Face config.json as a moelab Config.
#include <set>
#include <vector>

#include "convert/hf_config.h"
#include "util/error.h"

namespace moelab {
namespace {

using json = nlohmann::json;

bool is_set(const json& j, const std::string& key) {
  return j.contains(key) && !j[key].is_null();
}

template <typename T>
T config_value(const json& j, const std::string& key, const std::string& path) {
  if (!is_set(j, key)) throw InputError(path + ": no \"" + key + "\"");
  try {
    return j[key].get<T>();
  } catch (const json::exception&) {
    throw InputError(path + ": \"" + key + "\" has the wrong type");
  }
}

template <typename T>
T optional_value(const json& j, const std::string& key, T fallback, const std::string& path) {
  return is_set(j, key) ? config_value<T>(j, key, path) : fallback;
}

void refuse_rope_scaling(const json& j, const std::string& path) {
  if (is_set(j, "rope_scaling")) {
    throw InputError(path + ": rope_scaling is set; moelab's RoPE has no scaling");
  }
  if (is_set(j, "rope_parameters") &&
      j["rope_parameters"].value("rope_type", std::string("default")) != "default") {
    throw InputError(path + ": rope_parameters.rope_type = " +
                     j["rope_parameters"]["rope_type"].dump() + "; moelab's RoPE is \"default\"");
  }
}

// The keys every family shares (Llama's attention and norms).
Config common_config(const json& j, const std::string& path) {
  refuse_rope_scaling(j, path);
  for (const char* bias : {"attention_bias", "mlp_bias"}) {
    if (optional_value(j, bias, false, path)) {
      throw InputError(path + ": " + bias + " = true; moelab has no biases");
    }
  }
  if (optional_value<std::string>(j, "hidden_act", "silu", path) != "silu") {
    throw InputError(path + ": hidden_act = " + j["hidden_act"].dump() + "; expected silu");
  }
  Config cfg;
  auto& m = cfg.model;
  m.vocab_size = config_value<int64_t>(j, "vocab_size", path);
  m.d_model = config_value<int64_t>(j, "hidden_size", path);
  m.n_layers = config_value<int64_t>(j, "num_hidden_layers", path);
  m.n_heads = config_value<int64_t>(j, "num_attention_heads", path);
  m.n_kv_heads = optional_value(j, "num_key_value_heads", m.n_heads, path);
  m.d_ff = config_value<int64_t>(j, "intermediate_size", path);
  m.seq_len = config_value<int64_t>(j, "max_position_embeddings", path);
  m.norm_eps = optional_value(j, "rms_norm_eps", 1e-6, path);
  m.rope_theta = optional_value(j, "rope_theta", 10000.0, path);
  if (is_set(j, "rope_parameters") && is_set(j["rope_parameters"], "rope_theta")) {
    m.rope_theta = config_value<double>(j["rope_parameters"], "rope_theta", path);
  }
  m.tie_embeddings = optional_value(j, "tie_word_embeddings", false, path);
  if (is_set(j, "head_dim") &&
      config_value<int64_t>(j, "head_dim", path) * m.n_heads != m.d_model) {
    throw InputError(path +
                     ": head_dim * num_attention_heads != hidden_size; moelab needs "
                     "head_dim = hidden_size / num_attention_heads");
  }
  cfg.source = path;
  return cfg;
}

// moelab's first_dense_layers / layer_interval giving exactly Qwen's MoE
// layers: layer l is MoE unless in mlp_only_layers, when (l + 1) % step == 0.
void qwen_layer_pattern(const json& j, Config& cfg, const std::string& path) {
  const int64_t n = cfg.model.n_layers;
  const auto step = optional_value<int64_t>(j, "decoder_sparse_step", 1, path);
  if (step < 1) throw InputError(path + ": decoder_sparse_step < 1");
  const auto only = optional_value(j, "mlp_only_layers", std::vector<int64_t>{}, path);
  const std::set<int64_t> dense(only.begin(), only.end());
  std::vector<bool> moe(static_cast<size_t>(n));
  for (int64_t l = 0; l < n; ++l) moe[size_t(l)] = !dense.count(l) && (l + 1) % step == 0;
  for (int64_t first = 0; first < n; ++first) {
    for (int64_t interval = 1; interval <= n; ++interval) {
      cfg.moe.first_dense_layers = first;
      cfg.moe.layer_interval = interval;
      bool same = true;
      for (int64_t l = 0; l < n && same; ++l) same = cfg.moe.is_moe_layer(l) == moe[size_t(l)];
      if (same) return;
    }
  }
  throw InputError(path +
                   ": decoder_sparse_step and mlp_only_layers make MoE layers that "
                   "moe.first_dense_layers and moe.layer_interval cannot express");
}

void moe_keys(const json& j, HfFamily family, Config& cfg, const std::string& path) {
  auto& e = cfg.moe;
  e.enabled = true;
  e.top_k = config_value<int64_t>(j, "num_experts_per_tok", path);
  // The Hub's Qwen and OLMoE configs say num_experts; transformers 5 writes
  // num_local_experts for some of them.
  const bool local = family == HfFamily::Mixtral || !is_set(j, "num_experts");
  e.num_experts = config_value<int64_t>(j, local ? "num_local_experts" : "num_experts", path);
  const bool qwen = family == HfFamily::Qwen2Moe || family == HfFamily::Qwen3Moe;
  e.d_expert = config_value<int64_t>(j, qwen ? "moe_intermediate_size" : "intermediate_size", path);
  if (family != HfFamily::Mixtral) {
    // Qwen's and OLMoE's default is false.
    e.gate =
        optional_value(j, "norm_topk_prob", false, path) ? Gate::kTopkSoftmax : Gate::kFullSoftmax;
  }
  if (qwen) qwen_layer_pattern(j, cfg, path);
  if (family == HfFamily::Qwen2Moe) {
    const auto shared = config_value<int64_t>(j, "shared_expert_intermediate_size", path);
    e.num_shared_experts = shared > 0 ? 1 : 0;
    e.d_shared = shared;
  }
}

// Keys of one family that change the computation in ways moelab has not.
void refuse_family_keys(const json& j, HfFamily family, Config& cfg, const std::string& path) {
  const bool qwen = family == HfFamily::Qwen2Moe || family == HfFamily::Qwen3Moe;
  if (qwen && optional_value(j, "use_sliding_window", false, path)) {
    throw InputError(path + ": use_sliding_window = true; moelab's attention is full");
  }
  if (family == HfFamily::Mixtral && is_set(j, "sliding_window") &&
      config_value<int64_t>(j, "sliding_window", path) < cfg.model.seq_len) {
    throw InputError(path +
                     ": sliding_window < max_position_embeddings; moelab's attention is full");
  }
  if (family == HfFamily::Olmoe && is_set(j, "clip_qkv")) {
    throw InputError(path + ": clip_qkv is set; moelab does not clip q, k and v");
  }
}

}  // namespace

Config config_from_hf(const json& j, HfFamily family, const std::string& path) {
  Config cfg = common_config(j, path);
  refuse_family_keys(j, family, cfg, path);
  if (family == HfFamily::Qwen3Moe) cfg.model.qk_norm = QkNorm::kHead;
  if (family == HfFamily::Olmoe) cfg.model.qk_norm = QkNorm::kFull;
  if (family != HfFamily::Llama) moe_keys(j, family, cfg, path);
  return cfg;
}

}  // namespace moelab
