#include "hub/tensor_names.h"

#include <tuple>

namespace moelab {
namespace {

using Shape = std::vector<int64_t>;
using Projections = std::array<std::string, 3>;

const Projections kMlp = {"gate_proj", "up_proj", "down_proj"};

struct Builder {
  const Config& cfg;
  const HubFamily& family;
  HfTensorMap map;

  void link(const std::string& ours, const std::string& theirs, Shape shape, double scale = 1.0) {
    map.links.push_back({ours, theirs, std::move(shape), scale});
  }
  void zero(const std::string& theirs, Shape shape) {
    map.zeros.push_back({theirs, std::move(shape)});
  }

  // One SwiGLU: w1 = gate, w3 = up, w2 = down.
  void swiglu(const std::string& ours, const std::string& theirs, int64_t width,
              const Projections& names, double down_scale = 1.0) {
    const int64_t d = cfg.model.d_model;
    link(ours + ".w1", theirs + "." + names[0] + ".weight", {width, d});
    link(ours + ".w3", theirs + "." + names[1] + ".weight", {width, d});
    link(ours + ".w2", theirs + "." + names[2] + ".weight", {d, width}, down_scale);
  }

  void attention(const std::string& ours, const std::string& theirs) {
    const int64_t d = cfg.model.d_model, hd = cfg.model.head_dim();
    const int64_t q = cfg.model.n_heads * hd, kv = cfg.model.kv_heads() * hd;
    const std::string attn = theirs + ".self_attn.";
    link(ours + ".attn.wq", attn + "q_proj.weight", {q, d});
    link(ours + ".attn.wk", attn + "k_proj.weight", {kv, d});
    link(ours + ".attn.wv", attn + "v_proj.weight", {kv, d});
    link(ours + ".attn.wo", attn + "o_proj.weight", {d, q});
    if (cfg.model.qk_norm != QkNorm::kNone) {
      const bool head = cfg.model.qk_norm == QkNorm::kHead;
      link(ours + ".attn.q_norm.weight", attn + "q_norm.weight", {head ? hd : q});
      link(ours + ".attn.k_norm.weight", attn + "k_norm.weight", {head ? hd : kv});
    }
    // A family whose checkpoints always have q/k/v biases gets zeros from a
    // model without them.
    for (auto [ours_bias, theirs_bias, width] : {std::tuple{".attn.bq", "q_proj.bias", q},
                                                 {".attn.bk", "k_proj.bias", kv},
                                                 {".attn.bv", "v_proj.bias", kv}}) {
      if (cfg.model.qkv_bias) {
        link(ours + ours_bias, attn + theirs_bias, {width});
      } else if (family.qkv_bias) {
        zero(attn + theirs_bias, {width});
      }
    }
  }

  // Qwen2-MoE's shared expert, scaled by sigmoid(shared_expert_gate . x):
  // moelab's gate (moe.shared_expert_gate) is that gate. An ungated one is
  // written with a zero gate, 1/2 for every token, and its down projection
  // times 2 (both scalings powers of two: exact).
  void shared_expert(const std::string& ours, const std::string& theirs) {
    const int64_t d = cfg.model.d_model, width = cfg.moe.shared_width();
    const bool gated = cfg.moe.shared_expert_gate;
    if (gated) {
      link(ours + ".shared_gate", theirs + ".shared_expert_gate.weight", {1, d});
    } else {
      zero(theirs + ".shared_expert_gate.weight", {1, d});
    }
    if (width > 0) {
      swiglu(ours + ".shared", theirs + ".shared_expert", width, kMlp, gated ? 1.0 : 2.0);
      return;
    }
    // An empty shared expert: Qwen2-MoE always has one.
    zero(theirs + ".shared_expert.gate_proj.weight", {0, d});
    zero(theirs + ".shared_expert.up_proj.weight", {0, d});
    zero(theirs + ".shared_expert.down_proj.weight", {d, 0});
  }

  void moe(const std::string& ours, const std::string& layer) {
    const std::string theirs = layer + "." + family.moe_module;
    const auto& e = cfg.moe;
    link(ours + ".router.weight", theirs + ".gate.weight", {e.num_experts, cfg.model.d_model});
    for (int64_t i = 0; i < e.num_experts; ++i) {
      swiglu(ours + ".experts." + std::to_string(i), theirs + ".experts." + std::to_string(i),
             e.d_expert, family.expert_projections);
    }
    if (family.shared_expert) shared_expert(ours, theirs);
  }
};

}  // namespace

HfTensorMap hf_tensor_map(const Config& cfg, const HubFamily& family) {
  Builder b{cfg, family, {}};
  const int64_t d = cfg.model.d_model, vocab = cfg.model.vocab_size;
  b.link("embedding", "model.embed_tokens.weight", {vocab, d});
  for (int64_t l = 0; l < cfg.model.n_layers; ++l) {
    const std::string ours = "layers." + std::to_string(l);
    const std::string theirs = "model.layers." + std::to_string(l);
    b.link(ours + ".attn_norm.weight", theirs + ".input_layernorm.weight", {d});
    b.attention(ours, theirs);
    b.link(ours + ".ffn_norm.weight", theirs + ".post_attention_layernorm.weight", {d});
    if (cfg.moe.is_moe_layer(l)) {
      b.moe(ours + ".moe", theirs);
    } else {
      b.swiglu(ours + ".ffn", theirs + ".mlp", cfg.model.d_ff, kMlp);
    }
  }
  b.link("final_norm.weight", "model.norm.weight", {d});
  if (!cfg.model.tie_embeddings) b.link("head", "lm_head.weight", {vocab, d});
  return b.map;
}

}  // namespace moelab
