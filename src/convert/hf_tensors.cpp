#include "convert/hf_tensors.h"

namespace moelab {
namespace {

using Shape = std::vector<int64_t>;

struct Builder {
  const Config& cfg;
  HfFamily family;
  HfTensorMap map;

  void link(const std::string& ours, const std::string& theirs, Shape shape, double scale = 1.0) {
    map.links.push_back({ours, theirs, std::move(shape), scale});
  }

  // One SwiGLU: w1 = gate, w3 = up, w2 = down.
  void swiglu(const std::string& ours, const std::string& theirs, int64_t width,
              const char* const names[3], double down_scale = 1.0) {
    const int64_t d = cfg.model.d_model;
    link(ours + ".w1", theirs + names[0] + ".weight", {width, d});
    link(ours + ".w3", theirs + names[1] + ".weight", {width, d});
    link(ours + ".w2", theirs + names[2] + ".weight", {d, width}, down_scale);
  }

  void attention(const std::string& ours, const std::string& theirs) {
    const int64_t d = cfg.model.d_model, q = cfg.model.n_heads * cfg.model.head_dim();
    const int64_t kv = cfg.model.kv_heads() * cfg.model.head_dim();
    link(ours + ".attn.wq", theirs + ".self_attn.q_proj.weight", {q, d});
    link(ours + ".attn.wk", theirs + ".self_attn.k_proj.weight", {kv, d});
    link(ours + ".attn.wv", theirs + ".self_attn.v_proj.weight", {kv, d});
    link(ours + ".attn.wo", theirs + ".self_attn.o_proj.weight", {d, q});
    if (cfg.model.qk_norm != QkNorm::kNone) {
      const bool head = cfg.model.qk_norm == QkNorm::kHead;
      link(ours + ".attn.q_norm.weight", theirs + ".self_attn.q_norm.weight",
           {head ? cfg.model.head_dim() : q});
      link(ours + ".attn.k_norm.weight", theirs + ".self_attn.k_norm.weight",
           {head ? cfg.model.head_dim() : kv});
    }
    if (family == HfFamily::Qwen2Moe) {
      map.zeros.push_back({theirs + ".self_attn.q_proj.bias", {q}});
      map.zeros.push_back({theirs + ".self_attn.k_proj.bias", {kv}});
      map.zeros.push_back({theirs + ".self_attn.v_proj.bias", {kv}});
    }
  }

  void moe(const std::string& ours, const std::string& layer) {
    static const char* const classic[3] = {".gate_proj", ".up_proj", ".down_proj"};
    static const char* const mixtral[3] = {".w1", ".w3", ".w2"};
    const bool is_mixtral = family == HfFamily::Mixtral;
    const std::string theirs = layer + (is_mixtral ? ".block_sparse_moe" : ".mlp");
    const auto& e = cfg.moe;
    link(ours + ".router.weight", theirs + ".gate.weight", {e.num_experts, cfg.model.d_model});
    for (int64_t i = 0; i < e.num_experts; ++i) {
      swiglu(ours + ".experts." + std::to_string(i), theirs + ".experts." + std::to_string(i),
             e.d_expert, is_mixtral ? mixtral : classic);
    }
    if (family != HfFamily::Qwen2Moe) return;
    map.zeros.push_back({theirs + ".shared_expert_gate.weight", {1, cfg.model.d_model}});
    const int64_t shared = e.shared_width();
    if (shared > 0) {
      swiglu(ours + ".shared", theirs + ".shared_expert", shared, classic, 2.0);
    } else {  // an empty shared expert: Qwen2-MoE always has one
      const int64_t d = cfg.model.d_model;
      const std::string s = theirs + ".shared_expert";
      map.zeros.push_back({s + ".gate_proj.weight", {0, d}});
      map.zeros.push_back({s + ".up_proj.weight", {0, d}});
      map.zeros.push_back({s + ".down_proj.weight", {d, 0}});
    }
  }
};

}  // namespace

HfTensorMap hf_tensor_map(const Config& cfg, HfFamily family) {
  static const char* const mlp[3] = {".gate_proj", ".up_proj", ".down_proj"};
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
      b.swiglu(ours + ".ffn", theirs + ".mlp", cfg.model.d_ff, mlp);
    }
  }
  b.link("final_norm.weight", "model.norm.weight", {d});
  if (!cfg.model.tie_embeddings) b.link("head", "lm_head.weight", {vocab, d});
  return b.map;
}

}  // namespace moelab
