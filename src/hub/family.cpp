#include "hub/family.h"

#include <fmt/format.h>

#include "util/error.h"

namespace moelab {
namespace {

const std::array<std::string, 3> kProjections = {"gate_proj", "up_proj", "down_proj"};

std::vector<HubFamily> make_families() {
  HubFamily llama{"LlamaForCausalLM", "llama", "Llama"};
  HubFamily qwen2{"Qwen2ForCausalLM", "qwen2", "Qwen2"};
  qwen2.qkv_bias = true;
  qwen2.window = WindowKey::kFlag;
  HubFamily qwen3{"Qwen3ForCausalLM", "qwen3", "Qwen3"};
  qwen3.qk_norm = QkNorm::kHead;
  qwen3.window = WindowKey::kFlag;
  HubFamily mistral{"MistralForCausalLM", "mistral", "Mistral"};
  mistral.window = WindowKey::kLength;

  HubFamily mixtral{"MixtralForCausalLM", "mixtral", "Mixtral"};
  mixtral.window = WindowKey::kLength;
  mixtral.experts_key = "num_local_experts";
  mixtral.expert_width_key = "intermediate_size";
  mixtral.moe_module = "block_sparse_moe";
  mixtral.expert_projections = {"w1", "w3", "w2"};
  HubFamily olmoe{"OlmoeForCausalLM", "olmoe", "OLMoE"};
  olmoe.qk_norm = QkNorm::kFull;
  olmoe.refused_keys = {"clip_qkv"};
  olmoe.experts_key = "num_experts";
  olmoe.expert_width_key = "intermediate_size";
  olmoe.moe_module = "mlp";
  olmoe.expert_projections = kProjections;
  olmoe.gate_key = true;
  HubFamily qwen3_moe = olmoe;
  qwen3_moe.architecture = "Qwen3MoeForCausalLM";
  qwen3_moe.model_type = "qwen3_moe";
  qwen3_moe.name = "Qwen3-MoE";
  qwen3_moe.qk_norm = QkNorm::kHead;
  qwen3_moe.refused_keys = {};
  qwen3_moe.window = WindowKey::kFlag;
  qwen3_moe.expert_width_key = "moe_intermediate_size";
  qwen3_moe.layer_keys = true;
  HubFamily qwen2_moe = qwen3_moe;
  qwen2_moe.architecture = "Qwen2MoeForCausalLM";
  qwen2_moe.model_type = "qwen2_moe";
  qwen2_moe.name = "Qwen2-MoE";
  qwen2_moe.qk_norm = QkNorm::kNone;
  qwen2_moe.qkv_bias = true;
  qwen2_moe.shared_expert = true;
  return {llama, qwen2, qwen3, mistral, mixtral, olmoe, qwen3_moe, qwen2_moe};
}

// What no MoE family expresses: every one routes by a plain softmax, unscaled,
// to equal experts, drops nothing and has no routing bias.
void add_routing_obstacles(const MoeConfig& e, const std::string& name,
                           std::vector<std::string>& out) {
  if (e.score != Score::kSoftmax) {
    out.push_back("moe.score = \"" + choice_name(e.score) + "\" (" + name +
                  "'s router is a softmax)");
  }
  if (e.route_scale != 1.0) {
    out.push_back(fmt::format("moe.route_scale = {} ({} has no scale)", e.route_scale, name));
  }
  if (e.topk_groups < e.n_groups) {
    out.push_back(
        fmt::format("moe.n_groups = {} with moe.topk_groups = {} ({} routes among all "
                    "experts)",
                    e.n_groups, e.topk_groups, name));
  }
  if (!e.expert_widths.empty())
    out.push_back("moe.expert_widths (" + name + "'s experts are equal)");
  if (e.capacity_factor != 0)
    out.push_back("moe.capacity_factor > 0 (" + name + " drops no tokens)");
  if (e.balance == Balance::kAuxFree) {
    out.push_back("moe.balance = \"aux_free\" (" + name + " has no routing bias)");
  }
}

void add_moe_obstacles(const Config& cfg, const HubFamily& f, std::vector<std::string>& out) {
  add_routing_obstacles(cfg.moe, f.name, out);
  if (!f.gate_key && cfg.moe.gate != Gate::kTopkSoftmax) {
    out.push_back("moe.gate = \"" + choice_name(cfg.moe.gate) + "\" (" + f.name +
                  " renormalises the top-k)");
  }
  if (!f.shared_expert && cfg.moe.shared_width() > 0) {
    out.push_back("shared experts (" + f.name + " has none)");
  }
  if (!f.layer_keys && cfg.moe_layers() != cfg.model.n_layers) {
    out.push_back(
        "dense layers among the MoE layers (moe.first_dense_layers, moe.layer_interval; " + f.name +
        "'s are all MoE)");
  }
}

}  // namespace

const std::vector<HubFamily>& hub_families() {
  static const std::vector<HubFamily> families = make_families();
  return families;
}

const HubFamily& family_of_architecture(const std::string& architecture, const std::string& path) {
  std::string known;
  for (const HubFamily& f : hub_families()) {
    if (f.architecture == architecture) return f;
    known += (known.empty() ? "" : ", ") + f.architecture;
  }
  throw InputError(path + ": architectures = [\"" + architecture + "\"]; moelab imports " + known);
}

std::vector<std::string> inexpressible(const Config& cfg, const HubFamily& f) {
  std::vector<std::string> out;
  if (cfg.moe.enabled != f.moe()) {
    out.push_back(cfg.moe.enabled ? "moe.enabled = true (" + f.name + " is dense)"
                                  : "a dense model (" + f.name + "'s layers are MoE)");
  }
  if (cfg.model.latent_attention()) {
    out.push_back("model.attention = \"mla\" (" + f.name + "'s attention is multi-head)");
  }
  if (cfg.model.qk_norm != f.qk_norm) {
    out.push_back("model.qk_norm = \"" + choice_name(cfg.model.qk_norm) + "\" (" + f.name +
                  "'s is \"" + choice_name(f.qk_norm) + "\")");
  }
  if (cfg.model.qkv_bias && !f.qkv_bias) {
    out.push_back("model.qkv_bias = true (" + f.name + " has no q/k/v biases)");
  }
  if (cfg.moe.enabled && f.moe()) add_moe_obstacles(cfg, f, out);
  return out;
}

const HubFamily& export_family(const Config& cfg, const std::string& checkpoint) {
  const HubFamily* closest = nullptr;
  std::vector<std::string> closest_obstacles;
  for (const HubFamily& f : hub_families()) {
    const auto obstacles = inexpressible(cfg, f);
    if (obstacles.empty()) return f;
    if (f.moe() != cfg.moe.enabled) continue;  // never the closest
    if (!closest || obstacles.size() < closest_obstacles.size()) {
      closest = &f;
      closest_obstacles = obstacles;
    }
  }
  throw InputError(checkpoint + ": cannot be written as " + closest->architecture + ": " +
                   closest_obstacles.front());
}

}  // namespace moelab
