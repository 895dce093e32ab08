#include "hub/hf_config.h"

#include <set>
#include <vector>

#include "util/error.h"

namespace moelab {
namespace {

using json = nlohmann::json;

// The keys every family shares, each one [model] key.
struct IntegerKey {
  const char* hf;
  int64_t ModelConfig::*ours;
  bool required;
};
const IntegerKey kIntegerKeys[] = {
    {"vocab_size", &ModelConfig::vocab_size, true},
    {"hidden_size", &ModelConfig::d_model, true},
    {"num_hidden_layers", &ModelConfig::n_layers, true},
    {"num_attention_heads", &ModelConfig::n_heads, true},
    {"intermediate_size", &ModelConfig::d_ff, true},
    {"max_position_embeddings", &ModelConfig::seq_len, true},
};
struct RealKey {
  const char* hf;
  double ModelConfig::*ours;
  double fallback;  // the families' default when the key is absent
};
const RealKey kRealKeys[] = {
    {"rms_norm_eps", &ModelConfig::norm_eps, 1e-6},
    {"rope_theta", &ModelConfig::rope_theta, 10000.0},
};

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

std::vector<int64_t> dense_layers(const Config& cfg) {
  std::vector<int64_t> dense;
  for (int64_t l = 0; l < cfg.model.n_layers; ++l) {
    if (!cfg.moe.is_moe_layer(l)) dense.push_back(l);
  }
  return dense;
}

json shared_keys_json(const Config& cfg) {
  const auto& m = cfg.model;
  json j;
  for (const auto& key : kIntegerKeys) j[key.hf] = m.*key.ours;
  for (const auto& key : kRealKeys) j[key.hf] = m.*key.ours;
  j["num_key_value_heads"] = m.kv_heads();
  j["head_dim"] = m.head_dim();
  j["hidden_act"] = "silu";
  j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", m.rope_theta}};
  j["tie_word_embeddings"] = m.tie_embeddings;
  j["attention_bias"] = false;
  j["mlp_bias"] = false;
  j["attention_dropout"] = 0.0;
  j["torch_dtype"] = "float32";
  return j;
}

void add_moe_keys(json& j, const Config& cfg, const HubFamily& f) {
  const auto& e = cfg.moe;
  j["num_experts_per_tok"] = e.top_k;
  j["output_router_logits"] = false;
  j["router_jitter_noise"] = 0.0;
  j[f.experts_key] = e.num_experts;
  j[f.expert_width_key] = e.d_expert;  // over d_ff when the family names them alike
  if (f.gate_key) j["norm_topk_prob"] = e.gate == Gate::kTopkSoftmax;
  if (f.layer_keys) {
    // Layer l is MoE unless listed in mlp_only_layers (a step of 1 passes every layer).
    j["decoder_sparse_step"] = 1;
    j["mlp_only_layers"] = dense_layers(cfg);
  }
  if (f.shared_expert) j["shared_expert_intermediate_size"] = e.shared_width();
}

// The keys every family reads alike.
Config shared_keys(const json& j, const std::string& path) {
  Config cfg;
  auto& m = cfg.model;
  for (const auto& key : kIntegerKeys) {
    m.*key.ours = key.required ? config_value<int64_t>(j, key.hf, path)
                               : optional_value<int64_t>(j, key.hf, m.*key.ours, path);
  }
  for (const auto& key : kRealKeys) m.*key.ours = optional_value(j, key.hf, key.fallback, path);
  m.n_kv_heads = optional_value(j, "num_key_value_heads", m.n_heads, path);
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

// Keys of any family that change the computation in ways moelab has not.
void refuse_unexpressed_keys(const json& j, const HubFamily& f, const Config& cfg,
                             const std::string& path) {
  refuse_rope_scaling(j, path);
  for (const char* bias : {"attention_bias", "mlp_bias"}) {
    if (optional_value(j, bias, false, path)) {
      throw InputError(path + ": " + bias + " = true; moelab has no biases");
    }
  }
  if (optional_value<std::string>(j, "hidden_act", "silu", path) != "silu") {
    throw InputError(path + ": hidden_act = " + j["hidden_act"].dump() + "; expected silu");
  }
  for (const std::string& key : f.refused_keys) {
    if (is_set(j, key)) {
      throw InputError(path + ": " + key + " is set; moelab's " + f.name + " has no " + key);
    }
  }
  if (f.window == WindowKey::kFlag && optional_value(j, "use_sliding_window", false, path)) {
    throw InputError(path + ": use_sliding_window = true; moelab's attention is full");
  }
  if (f.window == WindowKey::kLength && is_set(j, "sliding_window") &&
      config_value<int64_t>(j, "sliding_window", path) < cfg.model.seq_len) {
    throw InputError(path +
                     ": sliding_window < max_position_embeddings; moelab's attention is full");
  }
}

// moelab's first_dense_layers / layer_interval giving exactly Qwen's MoE
// layers: layer l is MoE unless in mlp_only_layers, when (l + 1) % step == 0.
void read_layer_keys(const json& j, Config& cfg, const std::string& path) {
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

void read_moe_keys(const json& j, const HubFamily& f, Config& cfg, const std::string& path) {
  auto& e = cfg.moe;
  e.enabled = true;
  e.top_k = config_value<int64_t>(j, "num_experts_per_tok", path);
  // transformers 5 writes num_local_experts for some families that the Hub's
  // configs give as num_experts.
  const std::string experts_key = is_set(j, f.experts_key) ? f.experts_key : "num_local_experts";
  e.num_experts = config_value<int64_t>(j, experts_key, path);
  e.d_expert = config_value<int64_t>(j, f.expert_width_key, path);
  // The gate keys' default (Qwen, OLMoE) is false.
  if (f.gate_key) {
    e.gate =
        optional_value(j, "norm_topk_prob", false, path) ? Gate::kTopkSoftmax : Gate::kFullSoftmax;
  }
  if (f.layer_keys) read_layer_keys(j, cfg, path);
  if (f.shared_expert) {
    const auto shared = config_value<int64_t>(j, "shared_expert_intermediate_size", path);
    e.num_shared_experts = shared > 0 ? 1 : 0;
    e.d_shared = shared;
  }
}

}  // namespace

json hf_config_json(const Config& cfg, const HubFamily& f) {
  json j = shared_keys_json(cfg);
  j["architectures"] = {f.architecture};
  j["model_type"] = f.model_type;
  for (const std::string& key : f.refused_keys) j[key] = nullptr;
  if (f.window == WindowKey::kFlag) j["use_sliding_window"] = false;
  if (f.window == WindowKey::kLength) j["sliding_window"] = nullptr;
  if (f.moe()) add_moe_keys(j, cfg, f);
  return j;
}

const HubFamily& family_of(const json& j, const std::string& path) {
  const auto arch = j.value("architectures", json::array());
  if (!arch.is_array() || arch.size() != 1 || !arch[0].is_string()) {
    throw InputError(path + ": architectures = " + arch.dump() +
                     "; expected one architecture name");
  }
  return family_of_architecture(arch[0].get<std::string>(), path);
}

Config config_from_hf(const json& j, const HubFamily& f, const std::string& path) {
  Config cfg = shared_keys(j, path);
  refuse_unexpressed_keys(j, f, cfg, path);
  cfg.model.qk_norm = f.qk_norm;
  if (f.moe()) read_moe_keys(j, f, cfg, path);
  return cfg;
}

}  // namespace moelab
