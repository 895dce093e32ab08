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
  // transformers' DeepSeek configs hold the RoPE width there.
  j["head_dim"] = m.latent_attention() ? m.qk_rope_head_dim : m.head_dim();
  j["hidden_act"] = "silu";
  j["rope_parameters"] = rope_parameters_json(m);
  j["tie_word_embeddings"] = m.tie_embeddings;
  j["attention_bias"] = false;
  j["mlp_bias"] = false;
  j["attention_dropout"] = 0.0;
  j["torch_dtype"] = "float32";
  return j;
}

json latent_attention_json(const ModelConfig& m) {
  return {{"q_lora_rank", m.q_lora_rank > 0 ? json(m.q_lora_rank) : json(nullptr)},
          {"kv_lora_rank", m.kv_lora_rank},
          {"qk_nope_head_dim", m.qk_nope_head_dim},
          {"qk_rope_head_dim", m.qk_rope_head_dim},
          {"v_head_dim", m.v_head_dim}};
}

// DeepSeek's router keys: the route scale, the groups and how they are chosen.
void add_routing_keys(json& j, const MoeConfig& e, const HubFamily& f) {
  if (f.route_scale) j["routed_scaling_factor"] = e.route_scale;
  if (!f.grouped) return;
  j["n_group"] = e.n_groups;
  j["topk_group"] = e.topk_groups;
  if (f.group_score == GroupScore::kMax) {  // DeepSeek-V2 turns its groups on by name
    j["topk_method"] = e.topk_groups < e.n_groups ? "group_limited_greedy" : "greedy";
  }
}

void add_moe_keys(json& j, const Config& cfg, const HubFamily& f) {
  const auto& e = cfg.moe;
  j["num_experts_per_tok"] = e.top_k;
  j["output_router_logits"] = false;
  j["router_jitter_noise"] = 0.0;
  j[f.experts_key] = e.num_experts;
  j[f.expert_width_key] = e.d_expert;  // over d_ff when the family names them alike
  if (f.gate == TopkGate::kKeyed) j["norm_topk_prob"] = e.gate == Gate::kTopkSoftmax;
  if (f.dense_layers == DenseLayerKeys::kSparseStep) {
    // Layer l is MoE unless listed in mlp_only_layers (a step of 1 passes every layer).
    j["decoder_sparse_step"] = 1;
    j["mlp_only_layers"] = dense_layers(cfg);
  }
  if (f.dense_layers == DenseLayerKeys::kFirstK) j["first_k_dense_replace"] = e.first_dense_layers;
  if (f.shared == SharedExperts::kGated) j["shared_expert_intermediate_size"] = e.shared_width();
  if (f.shared == SharedExperts::kUngated) j["n_shared_experts"] = e.shared_width() / e.d_expert;
  add_routing_keys(j, e, f);
}

// The scaling's parameters: transformers 5's rope_parameters, or the
// rope_scaling of the configs published before it ("type" or "rope_type").
json rope_scaling_node(const json& j) {
  if (is_set(j, "rope_parameters") && j["rope_parameters"].is_object()) return j["rope_parameters"];
  if (is_set(j, "rope_scaling") && j["rope_scaling"].is_object()) return j["rope_scaling"];
  return json::object();
}

double positive_or_zero(const json& r, const char* key, const std::string& where) {
  return is_set(r, key) ? config_value<double>(r, key, where) : 0.0;
}

// model.rope_scaling from a config.json; types moelab has not are refused by name.
void read_rope_scaling(const json& j, ModelConfig& m, const std::string& path) {
  const json r = rope_scaling_node(j);
  const std::string where = path + ": rope scaling";
  const std::string type = optional_value<std::string>(
      r, "rope_type", optional_value<std::string>(r, "type", "default", where), where);
  if (optional_value(r, "partial_rotary_factor", 1.0, where) != 1.0 ||
      optional_value(j, "partial_rotary_factor", 1.0, path) != 1.0) {
    throw InputError(path + ": partial_rotary_factor != 1; moelab's RoPE rotates whole heads");
  }
  if (type == "default") return;
  RopeScaling& s = m.rope_scaling;
  if (type == "llama3") {
    s.type = RopeScalingType::kLlama3;
    s.low_freq_factor = config_value<double>(r, "low_freq_factor", where);
    s.high_freq_factor = config_value<double>(r, "high_freq_factor", where);
  } else if (type == "yarn") {
    s.type = RopeScalingType::kYarn;
    s.beta_fast = positive_or_zero(r, "beta_fast", where);  // transformers: a zero is the default
    s.beta_slow = positive_or_zero(r, "beta_slow", where);
    if (s.beta_fast == 0) s.beta_fast = 32;
    if (s.beta_slow == 0) s.beta_slow = 1;
    s.mscale = positive_or_zero(r, "mscale", where);
    s.mscale_all_dim = positive_or_zero(r, "mscale_all_dim", where);
    if (s.mscale == 0 || s.mscale_all_dim == 0)
      s.mscale = s.mscale_all_dim = 0;  // one alone: unread
    s.attention_factor = positive_or_zero(r, "attention_factor", where);
    s.truncate = optional_value(r, "truncate", true, where);
  } else {
    throw InputError(path + ": RoPE scaling type \"" + type +
                     "\"; moelab has \"default\", \"llama3\" and \"yarn\"");
  }
  s.original_seq_len = config_value<int64_t>(r, "original_max_position_embeddings", where);
  // yarn without a factor: the context's stretch (transformers does the same).
  s.factor = is_set(r, "factor") ? config_value<double>(r, "factor", where)
                                 : double(m.seq_len) / double(s.original_seq_len);
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
  // moelab's default (0) where the heads tile hidden_size, as most configs' do.
  const auto head_dim = optional_value<int64_t>(j, "head_dim", 0, path);
  if (head_dim > 0 && head_dim * m.n_heads != m.d_model) m.explicit_head_dim = head_dim;
  read_rope_scaling(j, m, path);
  cfg.source = path;
  return cfg;
}

// Keys of any family that change the computation in ways moelab has not.
void refuse_unexpressed_keys(const json& j, const HubFamily& f, const Config& cfg,
                             const std::string& path) {
  if (optional_value(j, "attention_bias", false, path)) {
    throw InputError(path +
                     ": attention_bias = true (an o_proj bias too); moelab's attention biases "
                     "are q/k/v only (model.qkv_bias)");
  }
  if (optional_value(j, "mlp_bias", false, path)) {
    throw InputError(path + ": mlp_bias = true; moelab's feed-forward blocks have no biases");
  }
  if (optional_value<std::string>(j, "hidden_act", "silu", path) != "silu") {
    throw InputError(path + ": hidden_act = " + j["hidden_act"].dump() + "; expected silu");
  }
  if (is_set(j, "quantization_config")) {
    throw InputError(path + ": quantization_config is set; moelab reads unquantised weights");
  }
  for (const std::string& key : f.refused_keys) {
    if (is_set(j, key)) {
      throw InputError(path + ": " + key + " is set; moelab's " + f.name + " has no " + key);
    }
  }
  for (const FixedKey& fixed : f.fixed_keys) {
    if (is_set(j, fixed.key) && j[fixed.key] != json::parse(fixed.value)) {
      throw InputError(path + ": " + fixed.key + " = " + j[fixed.key].dump() + "; expected " +
                       fixed.value + ": " + fixed.why);
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

// DeepSeek's groups: always on in V3; in V2 by topk_method.
void read_groups(const json& j, const HubFamily& f, MoeConfig& e, const std::string& path) {
  e.group_score = f.group_score;
  if (f.group_score == GroupScore::kMax) {
    const auto method = optional_value<std::string>(j, "topk_method", "greedy", path);
    if (method == "greedy") return;
    if (method != "group_limited_greedy") {
      throw InputError(path + ": topk_method = \"" + method + "\"; transformers' " +
                       f.architecture + " routes by \"greedy\" or \"group_limited_greedy\"");
    }
  }
  e.n_groups = config_value<int64_t>(j, "n_group", path);
  e.topk_groups = config_value<int64_t>(j, "topk_group", path);
}

// The router's keys beyond the top-k: scores, scale, groups and routing bias.
void read_routing_keys(const json& j, const HubFamily& f, MoeConfig& e, const std::string& path) {
  e.score = f.score;
  if (f.route_scale) e.route_scale = optional_value(j, "routed_scaling_factor", 1.0, path);
  if (f.grouped) read_groups(j, f, e, path);
  // The bias (e_score_correction_bias) is moelab's aux-free balance's.
  if (f.routing_bias) e.balance = Balance::kAuxFree;
}

void read_shared_experts(const json& j, const HubFamily& f, MoeConfig& e, const std::string& path) {
  if (f.shared == SharedExperts::kGated) {
    const auto shared = config_value<int64_t>(j, "shared_expert_intermediate_size", path);
    e.num_shared_experts = shared > 0 ? 1 : 0;
    e.d_shared = shared;
    e.shared_expert_gate = shared > 0;  // without a shared expert the gate scales nothing
  }
  if (f.shared == SharedExperts::kUngated) {
    e.num_shared_experts = config_value<int64_t>(j, "n_shared_experts", path);
  }
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
  if (f.gate == TopkGate::kKeyed) {
    e.gate = optional_value(j, "norm_topk_prob", f.norm_topk_default, path) ? Gate::kTopkSoftmax
                                                                            : Gate::kFullSoftmax;
  }
  if (f.gate == TopkGate::kAsScored) e.gate = Gate::kFullSoftmax;
  if (f.dense_layers == DenseLayerKeys::kSparseStep) read_layer_keys(j, cfg, path);
  if (f.dense_layers == DenseLayerKeys::kFirstK) {
    e.first_dense_layers = optional_value<int64_t>(j, "first_k_dense_replace", 0, path);
  }
  read_shared_experts(j, f, e, path);
  read_routing_keys(j, f, e, path);
}

// DeepSeek's latent attention: its widths; every head its own keys and
// values (transformers repeats none), the YaRN mscales both or neither, and
// rms_norm_eps the latent norms' eps too (family.h).
void read_latent_attention(const json& j, ModelConfig& m, const std::string& path) {
  if (m.norm_eps != kDeepSeekLatentNormEps) {
    throw InputError(path + ": rms_norm_eps = " + j["rms_norm_eps"].dump() +
                     "; DeepSeek normalises the latents with eps 1e-06, moelab with rms_norm_eps");
  }
  if (m.n_kv_heads != m.n_heads) {
    throw InputError(path + ": num_key_value_heads = " + std::to_string(m.n_kv_heads) +
                     " != num_attention_heads; latent attention expands keys and values for "
                     "every head");
  }
  const json r = rope_scaling_node(j);
  if (m.rope_scaling.type == RopeScalingType::kYarn &&
      is_set(r, "mscale") != is_set(r, "mscale_all_dim")) {
    throw InputError(path +
                     ": rope scaling has one of mscale and mscale_all_dim; moelab's latent "
                     "attention reads both or neither");
  }
  m.attention = AttentionKind::kMla;
  m.n_kv_heads = 0;
  m.explicit_head_dim = 0;  // transformers writes qk_rope_head_dim there
  m.q_lora_rank = optional_value<int64_t>(j, "q_lora_rank", 0, path);
  m.kv_lora_rank = config_value<int64_t>(j, "kv_lora_rank", path);
  m.qk_nope_head_dim = config_value<int64_t>(j, "qk_nope_head_dim", path);
  m.qk_rope_head_dim = config_value<int64_t>(j, "qk_rope_head_dim", path);
  m.v_head_dim = config_value<int64_t>(j, "v_head_dim", path);
}

}  // namespace

json rope_parameters_json(const ModelConfig& m) {
  const RopeScaling& r = m.rope_scaling;
  json j = {{"rope_type", r.type == RopeScalingType::kNone ? "default" : choice_name(r.type)},
            {"rope_theta", m.rope_theta}};
  if (r.type == RopeScalingType::kNone) return j;
  j["factor"] = r.factor;
  j["original_max_position_embeddings"] = r.original_seq_len;
  if (r.type == RopeScalingType::kLlama3) {
    j["low_freq_factor"] = r.low_freq_factor;
    j["high_freq_factor"] = r.high_freq_factor;
    return j;
  }
  j["beta_fast"] = r.beta_fast;
  j["beta_slow"] = r.beta_slow;
  j["truncate"] = r.truncate;
  // Zero is moelab's "not given": transformers reads those keys' absence (null).
  for (auto [key, value] : {std::pair{"mscale", r.mscale},
                            {"mscale_all_dim", r.mscale_all_dim},
                            {"attention_factor", r.attention_factor}}) {
    j[key] = value > 0 ? json(value) : json(nullptr);
  }
  return j;
}

json hf_config_json(const Config& cfg, const HubFamily& f) {
  json j = shared_keys_json(cfg);
  j["architectures"] = {f.architecture};
  j["model_type"] = f.model_type;
  for (const std::string& key : f.refused_keys) j[key] = nullptr;
  for (const FixedKey& fixed : f.fixed_keys) j[fixed.key] = json::parse(fixed.value);
  if (f.window == WindowKey::kFlag) j["use_sliding_window"] = false;
  if (f.window == WindowKey::kLength) j["sliding_window"] = nullptr;
  if (f.latent_attention) j.update(latent_attention_json(cfg.model));
  if (f.mtp_key) j["num_nextn_predict_layers"] = 0;  // moelab's MTP is not exported
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
  cfg.model.qkv_bias = f.qkv_bias;
  if (f.latent_attention) read_latent_attention(j, cfg.model, path);
  if (f.moe()) read_moe_keys(j, f, cfg, path);
  return cfg;
}

}  // namespace moelab
