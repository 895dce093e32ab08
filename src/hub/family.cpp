#include "hub/family.h"

#include <fmt/format.h>

#include <utility>

#include "util/error.h"

namespace moelab {
namespace {

const std::array<std::string, 3> kProjections = {"gate_proj", "up_proj", "down_proj"};

// What DeepSeek-V2 and V3 share: latent attention, routed experts beside
// ungated shared ones, dense first layers, a route scale and groups.
HubFamily deepseek(const std::string& architecture, const std::string& model_type,
                   const std::string& name) {
  HubFamily f{architecture, model_type, name};
  f.latent_attention = true;
  f.experts_key = "n_routed_experts";
  f.expert_width_key = "moe_intermediate_size";
  f.moe_module = "mlp";
  f.expert_projections = kProjections;
  f.shared = SharedExperts::kUngated;
  f.dense_layers = DenseLayerKeys::kFirstK;
  f.route_scale = true;
  f.grouped = true;
  f.fixed_keys = {{"moe_layer_freq", "1",
                   "transformers makes every layer after first_k_dense_replace MoE (DeepSeek's "
                   "code every moe_layer_freq-th)"}};
  return f;
}

// transformers' DeepseekV2: softmax scores, the top-k as they are, groups
// (topk_method = "group_limited_greedy") scored by their best expert.
HubFamily deepseek_v2() {
  HubFamily f = deepseek("DeepseekV2ForCausalLM", "deepseek_v2", "DeepSeek-V2");
  f.heads_tile_d_model = true;
  f.gate = TopkGate::kAsScored;
  f.group_score = GroupScore::kMax;
  f.fixed_keys.push_back({"scoring_func", "\"softmax\"", "DeepSeek-V2's router is a softmax"});
  f.fixed_keys.push_back({"norm_topk_prob", "false",
                          "transformers' DeepseekV2 does not renormalise the top-k "
                          "(DeepSeek's code does)"});
  return f;
}

// transformers' DeepseekV3: sigmoid scores, groups by their top-2 sum and a
// routing bias (noaux_tc), the RoPE rows interleaved.
HubFamily deepseek_v3() {
  HubFamily f = deepseek("DeepseekV3ForCausalLM", "deepseek_v3", "DeepSeek-V3");
  f.gate = TopkGate::kKeyed;
  f.norm_topk_default = true;
  f.score = Score::kSigmoid;
  f.group_score = GroupScore::kTop2Sum;
  f.routing_bias = true;
  f.mtp_key = true;
  f.fixed_keys.push_back({"scoring_func", "\"sigmoid\"", "DeepSeek-V3's router is a sigmoid"});
  f.fixed_keys.push_back(
      {"topk_method", "\"noaux_tc\"", "transformers' DeepseekV3 routes by noaux_tc"});
  f.fixed_keys.push_back(
      {"rope_interleave", "true",
       "moelab reads DeepSeek's interleaved RoPE rows (model/latent_attention.h)"});
  return f;
}

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
  olmoe.gate = TopkGate::kKeyed;
  HubFamily qwen3_moe = olmoe;
  qwen3_moe.architecture = "Qwen3MoeForCausalLM";
  qwen3_moe.model_type = "qwen3_moe";
  qwen3_moe.name = "Qwen3-MoE";
  qwen3_moe.qk_norm = QkNorm::kHead;
  qwen3_moe.refused_keys = {};
  qwen3_moe.window = WindowKey::kFlag;
  qwen3_moe.expert_width_key = "moe_intermediate_size";
  qwen3_moe.dense_layers = DenseLayerKeys::kSparseStep;
  HubFamily qwen2_moe = qwen3_moe;
  qwen2_moe.architecture = "Qwen2MoeForCausalLM";
  qwen2_moe.model_type = "qwen2_moe";
  qwen2_moe.name = "Qwen2-MoE";
  qwen2_moe.qk_norm = QkNorm::kNone;
  qwen2_moe.qkv_bias = true;
  qwen2_moe.shared = SharedExperts::kGated;
  return {llama, qwen2,     qwen3,     mistral,       mixtral,
          olmoe, qwen3_moe, qwen2_moe, deepseek_v2(), deepseek_v3()};
}

// The router: scores, scale and groups as the family has them; expert widths,
// capacity and a routing bias none but DeepSeek-V3's has.
void add_routing_obstacles(const MoeConfig& e, const HubFamily& f, std::vector<std::string>& out) {
  if (e.score != f.score) {
    out.push_back("moe.score = \"" + choice_name(e.score) + "\" (" + f.name + "'s router is a " +
                  choice_name(f.score) + ")");
  }
  if (e.route_scale != 1.0 && !f.route_scale) {
    out.push_back(fmt::format("moe.route_scale = {} ({} has no scale)", e.route_scale, f.name));
  }
  if (e.topk_groups < e.n_groups && !f.grouped) {
    out.push_back(
        fmt::format("moe.n_groups = {} with moe.topk_groups = {} ({} routes among all "
                    "experts)",
                    e.n_groups, e.topk_groups, f.name));
  } else if (e.topk_groups < e.n_groups && e.group_score != f.group_score) {
    out.push_back("moe.group_score = \"" + choice_name(e.group_score) + "\" (" + f.name +
                  " scores a group by its " +
                  (f.group_score == GroupScore::kMax ? "best expert)" : "two best experts)"));
  }
  if (!e.expert_widths.empty())
    out.push_back("moe.expert_widths (" + f.name + "'s experts are equal)");
  if (e.capacity_factor != 0)
    out.push_back("moe.capacity_factor > 0 (" + f.name + " drops no tokens)");
  if (e.balance == Balance::kAuxFree && !f.routing_bias) {
    out.push_back("moe.balance = \"aux_free\" (" + f.name + " has no routing bias)");
  }
}

void add_gate_obstacles(const MoeConfig& e, const HubFamily& f, std::vector<std::string>& out) {
  if (f.gate == TopkGate::kRenormalised && e.gate != Gate::kTopkSoftmax) {
    out.push_back("moe.gate = \"" + choice_name(e.gate) + "\" (" + f.name +
                  " renormalises the top-k)");
  }
  if (f.gate == TopkGate::kAsScored && e.gate != Gate::kFullSoftmax) {
    out.push_back("moe.gate = \"" + choice_name(e.gate) + "\" (" + f.name +
                  " weighs the top-k by their scores as they are)");
  }
}

void add_shared_obstacles(const MoeConfig& e, const HubFamily& f, std::vector<std::string>& out) {
  if (f.shared == SharedExperts::kNone && e.shared_width() > 0) {
    out.push_back("shared experts (" + f.name + " has none)");
  }
  if (f.shared != SharedExperts::kUngated) return;
  if (e.shared_expert_gate) {
    out.push_back("moe.shared_expert_gate = true (" + f.name + "'s shared experts are ungated)");
  }
  if (e.shared_width() % e.d_expert != 0) {
    out.push_back(fmt::format(
        "a shared-expert width of {} ({}'s is n_shared_experts x moe.d_expert, a multiple of {})",
        e.shared_width(), f.name, e.d_expert));
  }
}

void add_moe_obstacles(const Config& cfg, const HubFamily& f, std::vector<std::string>& out) {
  add_routing_obstacles(cfg.moe, f, out);
  add_gate_obstacles(cfg.moe, f, out);
  add_shared_obstacles(cfg.moe, f, out);
  if (f.dense_layers == DenseLayerKeys::kNone && cfg.moe_layers() != cfg.model.n_layers) {
    out.push_back(
        "dense layers among the MoE layers (moe.first_dense_layers, moe.layer_interval; " + f.name +
        "'s are all MoE)");
  }
  if (f.dense_layers == DenseLayerKeys::kFirstK && cfg.moe.layer_interval != 1) {
    out.push_back(fmt::format(
        "moe.layer_interval = {} ({}'s MoE layers are every layer after the first dense ones)",
        cfg.moe.layer_interval, f.name));
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
  if (cfg.model.latent_attention() != f.latent_attention) {
    out.push_back("model.attention = \"" + choice_name(cfg.model.attention) + "\" (" + f.name +
                  "'s attention is " + (f.latent_attention ? "latent)" : "multi-head)"));
  }
  if (f.latent_attention && cfg.model.norm_eps != kDeepSeekLatentNormEps) {
    out.push_back(fmt::format("model.norm_eps = {} ({}'s latent norms' eps is {})",
                              cfg.model.norm_eps, f.name, kDeepSeekLatentNormEps));
  }
  if (f.heads_tile_d_model && cfg.model.d_model % cfg.model.n_heads != 0) {
    out.push_back(
        fmt::format("model.n_heads = {} does not divide model.d_model = {} ({}'s config "
                    "requires it)",
                    cfg.model.n_heads, cfg.model.d_model, f.name));
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
  // A family of the model's attention first, then the fewest obstacles.
  const auto distance = [&cfg](const HubFamily& f, const std::vector<std::string>& obstacles) {
    return std::pair{f.latent_attention != cfg.model.latent_attention(), obstacles.size()};
  };
  for (const HubFamily& f : hub_families()) {
    const auto obstacles = inexpressible(cfg, f);
    if (obstacles.empty()) return f;
    if (f.moe() != cfg.moe.enabled) continue;  // never the closest
    if (!closest || distance(f, obstacles) < distance(*closest, closest_obstacles)) {
      closest = &f;
      closest_obstacles = obstacles;
    }
  }
  throw InputError(checkpoint + ": cannot be written as " + closest->architecture + ": " +
                   closest_obstacles.front());
}

}  // namespace moelab
