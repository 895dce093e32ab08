// Which moelab checkpoint tensor is which Hugging Face tensor, for any family
// (family.h). Names come from the config, not from the model's modules, so
// they follow the checkpoint's names (layers.L.moe.experts.E.w1, ...) whatever
// the in-memory layout. Experts are listed by global id.
//
//   moelab                       Hugging Face (model.layers.L.)
//   attn.wq, wk, wv, wo          self_attn.{q,k,v,o}_proj
//   attn.q_norm, k_norm          self_attn.{q,k}_norm
//   ffn.w1, w3, w2               mlp.{gate,up,down}_proj
//   moe.router                   <moe_module>.gate
//   moe.experts.E.w1, w3, w2     <moe_module>.experts.E.<expert_projections>
//   moe.shared.w1, w3, w2        mlp.shared_expert.{gate,up,down}_proj (Qwen2-MoE)
//   moe.shared_gate              mlp.shared_expert_gate (Qwen2-MoE)
//   attn.bq, bk, bv              self_attn.{q,k,v}_proj.bias (Qwen2, Qwen2-MoE)
//   attn.wq | wq_a, q_a_norm, wq_b   self_attn.q_proj | q_a_proj, q_a_layernorm, q_b_proj
//   (DeepSeek) attn.wkv_a, kv_a_norm, wkv_b, wo self_attn.kv_a_proj_with_mqa, kv_a_layernorm,
//   kv_b_proj, o_proj moe.router.bias              mlp.gate.e_score_correction_bias (DeepSeek-V3)
//   moe.shared.w1, w3, w2        mlp.shared_experts.{gate,up,down}_proj (DeepSeek)
//
// DeepSeek's RoPE rows (the last qk_rope_head_dim rows of each head's query
// and of kv_a_proj_with_mqa) pair interleaved dims where moelab's rotate-half
// pairs i and i + n/2 (model/latent_attention.h): those rows are reordered,
// moelab's evens-then-odds from DeepSeek's on import and back on export.
//
// A family that always has a tensor the model lacks gets what computes the
// model: zero q/k/v biases; for an ungated shared expert, a zero gate
// (sigmoid(0) = 1/2 for every token) and the down projection times 2, both
// scalings powers of two, so exact in floating point.
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

#include "config/config.h"
#include "hub/family.h"

namespace moelab {

// Row blocks whose last rows are DeepSeek's interleaved RoPE rows.
struct RopeRows {
  int64_t block = 0;  // rows per block (a head's query, or the whole kv_a_proj); 0 = none
  int64_t rope = 0;   // its last `rope` rows are RoPE rows
};

struct HfLink {
  std::string ours;            // moelab checkpoint name
  std::string theirs;          // Hugging Face name
  std::vector<int64_t> shape;  // of both
  double scale = 1.0;          // theirs = scale * ours
  RopeRows rope_rows;          // theirs' RoPE rows interleaved
};

// A link's tensor as the Hugging Face folder holds it, from moelab's; and back.
torch::Tensor to_hf(const HfLink& link, const torch::Tensor& ours);
torch::Tensor from_hf(const HfLink& link, const torch::Tensor& theirs);

// A Hugging Face tensor with no moelab counterpart: moelab's model is the
// family's with this tensor zero.
struct HfZero {
  std::string theirs;
  std::vector<int64_t> shape;
};

struct HfTensorMap {
  std::vector<HfLink> links;
  std::vector<HfZero> zeros;
};

HfTensorMap hf_tensor_map(const Config& cfg, const HubFamily& family);

}  // namespace moelab
