#include "convert/hf_config.h"

#include <fmt/format.h>

#include <vector>

#include "util/error.h"

namespace moelab {
namespace {

using json = nlohmann::json;

bool all_moe(const Config& cfg) {
  return cfg.moe_layers() == cfg.model.n_layers;
}

// A family's short name, for messages: "(Mixtral has none)".
std::string short_name(HfFamily family) {
  switch (family) {
    case HfFamily::Llama:
      return "Llama";
    case HfFamily::Mixtral:
      return "Mixtral";
    case HfFamily::Qwen2Moe:
      return "Qwen2-MoE";
    case HfFamily::Qwen3Moe:
      return "Qwen3-MoE";
    case HfFamily::Olmoe:
      return "OLMoE";
  }
  throw std::logic_error("short_name: unknown family");
}

void refuse_unless(bool ok, HfFamily family, const std::string& checkpoint,
                   const std::string& what) {
  if (!ok) {
    throw InputError(checkpoint + ": cannot be written as " + hf_architecture(family) + ": " +
                     what);
  }
}

// What no MoE family expresses: every one routes by a plain softmax, unscaled,
// to equal experts, drops nothing and has no routing bias.
void refuse_routing(const MoeConfig& e, HfFamily family, const std::string& checkpoint) {
  const std::string name = short_name(family);
  refuse_unless(
      e.score == Score::kSoftmax, family, checkpoint,
      "moe.score = \"" + choice_name(e.score) + "\" (" + name + "'s router is a softmax)");
  refuse_unless(e.route_scale == 1.0, family, checkpoint,
                fmt::format("moe.route_scale = {} ({} has no scale)", e.route_scale, name));
  refuse_unless(e.expert_widths.empty(), family, checkpoint,
                "moe.expert_widths (" + name + "'s experts are equal)");
  refuse_unless(e.capacity_factor == 0, family, checkpoint,
                "moe.capacity_factor > 0 (" + name + " drops no tokens)");
  refuse_unless(e.balance != Balance::kAuxFree, family, checkpoint,
                "moe.balance = \"aux_free\" (" + name + " has no routing bias)");
}

// The QK-norm each family has: none, per head or over the whole projection.
QkNorm family_qk_norm(HfFamily family) {
  if (family == HfFamily::Qwen3Moe) return QkNorm::kHead;
  if (family == HfFamily::Olmoe) return QkNorm::kFull;
  return QkNorm::kNone;
}

json common_config_json(const Config& cfg) {
  const auto& m = cfg.model;
  return {{"vocab_size", m.vocab_size},
          {"hidden_size", m.d_model},
          {"num_hidden_layers", m.n_layers},
          {"num_attention_heads", m.n_heads},
          {"num_key_value_heads", cfg.model.kv_heads()},
          {"head_dim", cfg.model.head_dim()},
          {"hidden_act", "silu"},
          {"max_position_embeddings", m.seq_len},
          {"rms_norm_eps", m.norm_eps},
          {"rope_theta", m.rope_theta},
          {"rope_parameters", {{"rope_type", "default"}, {"rope_theta", m.rope_theta}}},
          {"tie_word_embeddings", m.tie_embeddings},
          {"attention_dropout", 0.0},
          {"torch_dtype", "float32"}};
}

std::vector<int64_t> dense_layers(const Config& cfg) {
  std::vector<int64_t> dense;
  for (int64_t l = 0; l < cfg.model.n_layers; ++l) {
    if (!cfg.moe.is_moe_layer(l)) dense.push_back(l);
  }
  return dense;
}

// Keys of the MoE families' configs (Mixtral's differ in names only).
void add_moe_keys(json& j, const Config& cfg, HfFamily family) {
  const auto& e = cfg.moe;
  j["num_experts_per_tok"] = e.top_k;
  j["output_router_logits"] = false;
  if (family == HfFamily::Mixtral) {
    j["num_local_experts"] = e.num_experts;
    j["intermediate_size"] = e.d_expert;
    j["router_jitter_noise"] = 0.0;
    j["sliding_window"] = nullptr;
    return;
  }
  j["num_experts"] = e.num_experts;
  j["norm_topk_prob"] = e.gate == Gate::kTopkSoftmax;
  j["attention_bias"] = false;
  if (family == HfFamily::Olmoe) {
    j["intermediate_size"] = e.d_expert;
    j["clip_qkv"] = nullptr;
    return;
  }
  // Qwen: layer l is MoE unless listed in mlp_only_layers (every layer passes
  // (l + 1) % decoder_sparse_step == 0 with a step of 1).
  j["moe_intermediate_size"] = e.d_expert;
  j["intermediate_size"] = cfg.model.d_ff;
  j["decoder_sparse_step"] = 1;
  j["mlp_only_layers"] = dense_layers(cfg);
  j["use_sliding_window"] = false;
  if (family == HfFamily::Qwen2Moe) {
    j["shared_expert_intermediate_size"] = e.shared_width();
    j["qkv_bias"] = true;  // written as zeros: every Qwen2-MoE loader expects them
  }
}

const char* model_type(HfFamily family) {
  switch (family) {
    case HfFamily::Llama:
      return "llama";
    case HfFamily::Mixtral:
      return "mixtral";
    case HfFamily::Qwen2Moe:
      return "qwen2_moe";
    case HfFamily::Qwen3Moe:
      return "qwen3_moe";
    case HfFamily::Olmoe:
      return "olmoe";
  }
  throw std::logic_error("model_type: unknown family");
}

}  // namespace

std::string hf_architecture(HfFamily family) {
  switch (family) {
    case HfFamily::Llama:
      return "LlamaForCausalLM";
    case HfFamily::Mixtral:
      return "MixtralForCausalLM";
    case HfFamily::Qwen2Moe:
      return "Qwen2MoeForCausalLM";
    case HfFamily::Qwen3Moe:
      return "Qwen3MoeForCausalLM";
    case HfFamily::Olmoe:
      return "OlmoeForCausalLM";
  }
  throw std::logic_error("hf_architecture: unknown family");
}

HfFamily export_family(const Config& cfg) {
  if (!cfg.moe.enabled) return HfFamily::Llama;
  if (cfg.model.qk_norm == QkNorm::kFull) return HfFamily::Olmoe;
  if (cfg.model.qk_norm == QkNorm::kHead) return HfFamily::Qwen3Moe;
  const bool mixtral =
      cfg.moe.gate == Gate::kTopkSoftmax && cfg.moe.shared_width() == 0 && all_moe(cfg);
  return mixtral ? HfFamily::Mixtral : HfFamily::Qwen2Moe;
}

void refuse_inexpressible(const Config& cfg, HfFamily family, const std::string& checkpoint) {
  const std::string name = short_name(family);
  const QkNorm qk = family_qk_norm(family);
  refuse_unless(cfg.model.qk_norm == qk, family, checkpoint,
                "model.qk_norm = \"" + choice_name(cfg.model.qk_norm) + "\" (" + name + "'s is \"" +
                    choice_name(qk) + "\")");
  if (family == HfFamily::Llama) return;
  refuse_routing(cfg.moe, family, checkpoint);
  if (family == HfFamily::Mixtral) {
    refuse_unless(
        cfg.moe.gate == Gate::kTopkSoftmax, family, checkpoint,
        "moe.gate = \"" + choice_name(cfg.moe.gate) + "\" (Mixtral renormalises the top-k)");
  }
  if (family != HfFamily::Qwen2Moe) {
    refuse_unless(cfg.moe.shared_width() == 0, family, checkpoint,
                  "shared experts (" + name + " has none)");
  }
  if (family == HfFamily::Mixtral || family == HfFamily::Olmoe) {
    refuse_unless(all_moe(cfg), family, checkpoint,
                  "dense layers among the MoE layers (moe.first_dense_layers, "
                  "moe.layer_interval; " +
                      name + "'s are all MoE)");
  }
}

json hf_config_json(const Config& cfg, HfFamily family) {
  json j = common_config_json(cfg);
  j["architectures"] = {hf_architecture(family)};
  j["model_type"] = model_type(family);
  if (family == HfFamily::Llama) {
    j["intermediate_size"] = cfg.model.d_ff;
    j["attention_bias"] = false;
    j["mlp_bias"] = false;
  } else {
    add_moe_keys(j, cfg, family);
  }
  return j;
}

HfFamily family_of(const json& j, const std::string& path) {
  const auto arch = j.value("architectures", json::array());
  for (HfFamily f : {HfFamily::Llama, HfFamily::Mixtral, HfFamily::Qwen2Moe, HfFamily::Qwen3Moe,
                     HfFamily::Olmoe}) {
    if (arch == json::array({hf_architecture(f)})) return f;
  }
  throw InputError(path + ": architectures = " + arch.dump() +
                   "; moelab imports LlamaForCausalLM, MixtralForCausalLM, "
                   "Qwen2MoeForCausalLM, Qwen3MoeForCausalLM and OlmoeForCausalLM");
}

}  // namespace moelab
