// Causal multi-head self-attention with RoPE and optional grouped-query heads
// (n_kv_heads < n_heads: each key/value head serves n_heads / n_kv_heads query
// heads), optional QK-norm (model.qk_norm) and optional q, k, v biases
// (model.qkv_bias); the output projection has none. Heads are
// model.head_dim wide, so the projections are [n_heads * head_dim, d_model]
// and need not be square.
#pragma once

#include <torch/torch.h>

#include <optional>

#include "config/config.h"
#include "model/rmsnorm.h"
#include "model/rope.h"

namespace moelab {

// What a transformer block calls for its attention (model.attention): this
// file's multi-head attention or model/latent_attention.h's.
class AttentionLayer : public torch::nn::Module {
 public:
  // x: [B, S, d] in the compute dtype; returns [B, S, d] in the same dtype.
  virtual torch::Tensor forward(const torch::Tensor& x) = 0;
};

class AttentionImpl : public AttentionLayer {
 public:
  explicit AttentionImpl(const ModelConfig& cfg);
  torch::Tensor forward(const torch::Tensor& x) override;

  torch::Tensor wq, wk, wv, wo;  // [out, in]
  torch::Tensor bq, bk, bv;      // [out] with model.qkv_bias, else undefined
  // model.qk_norm: over head_dim ("head") or over the whole projection ("full").
  RMSNorm q_norm{nullptr}, k_norm{nullptr};

 private:
  int64_t n_heads_, n_kv_heads_, head_dim_;
  bool norm_per_head_ = false;
  RopeTables rope_;
};
TORCH_MODULE(Attention);

// Causal attention, softmax(scale q k^T) v: q [B, H, S, hd], k [B, Hkv, S, hd]
// and v [B, Hkv, S, hd_v] -> [B, H, S, hd_v] (hd_v may differ from hd). On the
// CPU explicit_causal_attention, on CUDA the fused kernel.
torch::Tensor causal_attention(const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, double scale);

// Causal attention as two GEMMs around a softmax, the scores stored, shapes as
// causal_attention's; scale unset = 1/sqrt(hd). The queries go in
// `query_blocks` blocks, each against the keys up to its last query only, so
// most of the masked half of the scores is never computed. The CPU's path
// (faster there than the fused kernel); exposed for its test.
torch::Tensor explicit_causal_attention(const torch::Tensor& q, torch::Tensor k, torch::Tensor v,
                                        int64_t query_blocks = 1,
                                        std::optional<double> scale = std::nullopt);

}  // namespace moelab
