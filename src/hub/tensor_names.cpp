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

  void link(const std::string& ours, const std::string& theirs, Shape shape, double scale = 1.0,
            RopeRows rope_rows = {}) {
    map.links.push_back({ours, theirs, std::move(shape), scale, rope_rows});
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

  // DeepSeek's latent attention (model/latent_attention.h).
  void latent_attention(const std::string& ours, const std::string& theirs) {
    const auto& m = cfg.model;
    const int64_t d = m.d_model, h = m.n_heads, rope = m.qk_rope_head_dim;
    const RopeRows query_rope{m.qk_head_dim(), rope};
    const std::string attn = theirs + ".self_attn.";
    if (m.q_lora_rank > 0) {
      link(ours + ".attn.wq_a", attn + "q_a_proj.weight", {m.q_lora_rank, d});
      link(ours + ".attn.q_a_norm.weight", attn + "q_a_layernorm.weight", {m.q_lora_rank});
      link(ours + ".attn.wq_b", attn + "q_b_proj.weight", {h * m.qk_head_dim(), m.q_lora_rank}, 1.0,
           query_rope);
    } else {
      link(ours + ".attn.wq", attn + "q_proj.weight", {h * m.qk_head_dim(), d}, 1.0, query_rope);
    }
    const int64_t latent = m.kv_lora_rank + rope;
    link(ours + ".attn.wkv_a", attn + "kv_a_proj_with_mqa.weight", {latent, d}, 1.0,
         {latent, rope});
    link(ours + ".attn.kv_a_norm.weight", attn + "kv_a_layernorm.weight", {m.kv_lora_rank});
    link(ours + ".attn.wkv_b", attn + "kv_b_proj.weight",
         {h * (m.qk_nope_head_dim + m.v_head_dim), m.kv_lora_rank});
    link(ours + ".attn.wo", attn + "o_proj.weight", {d, h * m.v_head_dim});
  }

  void attention(const std::string& ours, const std::string& theirs) {
    if (cfg.model.latent_attention()) return latent_attention(ours, theirs);
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

  // A family that always has a shared expert gets empty tensors for none.
  void empty_shared_expert(const std::string& theirs) {
    const int64_t d = cfg.model.d_model;
    zero(theirs + ".gate_proj.weight", {0, d});
    zero(theirs + ".up_proj.weight", {0, d});
    zero(theirs + ".down_proj.weight", {d, 0});
  }

  // Qwen2-MoE's shared expert, scaled by sigmoid(shared_expert_gate . x):
  // moelab's gate (moe.shared_expert_gate) is that gate. An ungated one is
  // written with a zero gate, 1/2 for every token, and its down projection
  // times 2 (both scalings powers of two: exact).
  void gated_shared_expert(const std::string& ours, const std::string& theirs) {
    const int64_t d = cfg.model.d_model, width = cfg.moe.shared_width();
    const bool gated = cfg.moe.shared_expert_gate;
    if (gated) {
      link(ours + ".shared_gate", theirs + ".shared_expert_gate.weight", {1, d});
    } else {
      zero(theirs + ".shared_expert_gate.weight", {1, d});
    }
    if (width > 0) {
      swiglu(ours + ".shared", theirs + ".shared_expert", width, kMlp, gated ? 1.0 : 2.0);
    } else {
      empty_shared_expert(theirs + ".shared_expert");
    }
  }

  // DeepSeek's n_shared_experts experts, one SwiGLU as wide as all of them.
  void ungated_shared_experts(const std::string& ours, const std::string& theirs) {
    const int64_t width = cfg.moe.shared_width();
    if (width > 0) {
      swiglu(ours + ".shared", theirs + ".shared_experts", width, kMlp);
    } else {
      empty_shared_expert(theirs + ".shared_experts");
    }
  }

  void moe(const std::string& ours, const std::string& layer) {
    const std::string theirs = layer + "." + family.moe_module;
    const auto& e = cfg.moe;
    link(ours + ".router.weight", theirs + ".gate.weight", {e.num_experts, cfg.model.d_model});
    // DeepSeek-V3's routing bias is moelab's aux-free one, zero without it.
    if (family.routing_bias && e.balance == Balance::kAuxFree) {
      link(ours + ".router.bias", theirs + ".gate.e_score_correction_bias", {e.num_experts});
    } else if (family.routing_bias) {
      zero(theirs + ".gate.e_score_correction_bias", {e.num_experts});
    }
    for (int64_t i = 0; i < e.num_experts; ++i) {
      swiglu(ours + ".experts." + std::to_string(i), theirs + ".experts." + std::to_string(i),
             e.d_expert, family.expert_projections);
    }
    if (family.shared == SharedExperts::kGated) gated_shared_expert(ours, theirs);
    if (family.shared == SharedExperts::kUngated) ungated_shared_experts(ours, theirs);
  }
};

// The row order that takes a tensor to the other layout: in each block, the
// RoPE rows interleaved (a_0, b_0, a_1, b_1, ...) from moelab's halves
// (a_0.., b_0..), or the reverse.
torch::Tensor rope_row_order(const RopeRows& r, int64_t rows, bool to_interleaved) {
  std::vector<int64_t> order(static_cast<size_t>(rows));
  const int64_t half = r.rope / 2;
  for (int64_t row = 0; row < rows; ++row) {
    const int64_t in_block = row % r.block, j = in_block - (r.block - r.rope);
    int64_t source = row;
    if (j >= 0 && to_interleaved) source = row - j + (j % 2 == 0 ? j / 2 : half + j / 2);
    if (j >= 0 && !to_interleaved) source = row - j + (j < half ? 2 * j : 2 * (j - half) + 1);
    order[size_t(row)] = source;
  }
  return torch::tensor(order, torch::kLong);
}

torch::Tensor reorder_rope_rows(const RopeRows& r, const torch::Tensor& t, bool to_interleaved) {
  if (r.block == 0) return t;
  return t.index_select(0, rope_row_order(r, t.size(0), to_interleaved));
}

}  // namespace

torch::Tensor to_hf(const HfLink& link, const torch::Tensor& ours) {
  const auto scaled = link.scale == 1.0 ? ours : ours * link.scale;
  return reorder_rope_rows(link.rope_rows, scaled, /*to_interleaved=*/true);
}

torch::Tensor from_hf(const HfLink& link, const torch::Tensor& theirs) {
  const auto rows = reorder_rope_rows(link.rope_rows, theirs, /*to_interleaved=*/false);
  return link.scale == 1.0 ? rows : rows / link.scale;
}

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
