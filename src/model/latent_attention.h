// Multi-head latent attention (model.attention = "mla"), as DeepSeek-V2/V3
// define it (transformers' DeepseekV3Attention). Per token x [d]:
//   query: q = wq x, or with model.q_lora_rank > 0 through a bottleneck,
//     q = wq_b RMSNorm(wq_a x); per head qk_nope_head_dim dims without RoPE
//     then qk_rope_head_dim with.
//   keys and values: [c, k_rope] = wkv_a x, c the kv_lora_rank-wide latent;
//     per head [k_nope, v] = (wkv_b RMSNorm(c)) split into qk_nope_head_dim and
//     v_head_dim dims; the key is [k_nope, RoPE(k_rope)], the one RoPE key
//     shared by every head.
//   out = wo [heads' contexts], each v_head_dim wide.
// Scores are scaled by 1/sqrt(qk_nope_head_dim + qk_rope_head_dim) times
// latent_softmax_factor (YaRN's mscale_all_dim, model/rope.h); RoPE (its
// tables over qk_rope_head_dim) is model/rope.h's rotate-half layout.
//
// DeepSeek's checkpoints (rope_interleave, and V2's complex rotation) pair the
// RoPE dims interleaved, (x0, x1), (x2, x3), ...; rotate-half pairs (x_i,
// x_{i + n/2}). q.k is the same when the RoPE rows of wq/wq_b (each head's) and
// of wkv_a are reordered evens first, then odds (transformers' interleaved
// rotation computes exactly that), so an importer permutes those rows.
//
// Names against DeepSeek's: wq = q_proj, wq_a = q_a_proj, q_a_norm =
// q_a_layernorm, wq_b = q_b_proj, wkv_a = kv_a_proj_with_mqa, kv_a_norm =
// kv_a_layernorm, wkv_b = kv_b_proj, wo = o_proj.
#pragma once

#include <torch/torch.h>

#include "config/config.h"
#include "model/attention.h"
#include "model/rmsnorm.h"
#include "model/rope.h"

namespace moelab {

class LatentAttentionImpl : public AttentionLayer {
 public:
  explicit LatentAttentionImpl(const ModelConfig& cfg);
  torch::Tensor forward(const torch::Tensor& x) override;

  torch::Tensor wq;          // [H * qk_head_dim, d] without q_lora_rank, else undefined
  torch::Tensor wq_a, wq_b;  // [q_lora_rank, d], [H * qk_head_dim, q_lora_rank] with it
  RMSNorm q_a_norm{nullptr}, kv_a_norm{nullptr};
  torch::Tensor wkv_a;  // [kv_lora_rank + qk_rope_head_dim, d]
  torch::Tensor wkv_b;  // [H * (qk_nope_head_dim + v_head_dim), kv_lora_rank]
  torch::Tensor wo;     // [d, H * v_head_dim]

 private:
  // [B, H, S, qk_head_dim] from the normed input.
  torch::Tensor queries(const torch::Tensor& x);

  int64_t n_heads_, nope_dim_, rope_dim_, v_dim_, kv_rank_;
  double scale_;
  RopeTables rope_;
};
TORCH_MODULE(LatentAttention);

}  // namespace moelab
