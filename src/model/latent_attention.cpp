#include "model/latent_attention.h"

#include <cmath>

#include "model/compute.h"

namespace moelab {

LatentAttentionImpl::LatentAttentionImpl(const ModelConfig& cfg)
    : n_heads_(cfg.n_heads),
      nope_dim_(cfg.qk_nope_head_dim),
      rope_dim_(cfg.qk_rope_head_dim),
      v_dim_(cfg.v_head_dim),
      kv_rank_(cfg.kv_lora_rank),
      scale_(latent_softmax_factor(cfg.rope_scaling) / std::sqrt(double(cfg.qk_head_dim()))),
      rope_(make_rope_tables(cfg.seq_len, cfg.qk_rope_head_dim, cfg.rope_theta, cfg.rope_scaling)) {
  const int64_t d = cfg.d_model, q_width = n_heads_ * cfg.qk_head_dim();
  if (cfg.q_lora_rank > 0) {
    wq_a = register_parameter("wq_a", torch::empty({cfg.q_lora_rank, d}));
    q_a_norm = register_module("q_a_norm", RMSNorm(cfg.q_lora_rank, cfg.norm_eps));
    wq_b = register_parameter("wq_b", torch::empty({q_width, cfg.q_lora_rank}));
  } else {
    wq = register_parameter("wq", torch::empty({q_width, d}));
  }
  wkv_a = register_parameter("wkv_a", torch::empty({kv_rank_ + rope_dim_, d}));
  kv_a_norm = register_module("kv_a_norm", RMSNorm(kv_rank_, cfg.norm_eps));
  wkv_b = register_parameter("wkv_b", torch::empty({n_heads_ * (nope_dim_ + v_dim_), kv_rank_}));
  wo = register_parameter("wo", torch::empty({d, n_heads_ * v_dim_}));
}

torch::Tensor LatentAttentionImpl::queries(const torch::Tensor& x) {
  if (wq.defined()) return project(x, wq);
  const auto q_latent = project(x, wq_a);
  return project(q_a_norm->forward(q_latent, q_latent.scalar_type()), wq_b);
}

torch::Tensor LatentAttentionImpl::forward(const torch::Tensor& x) {
  const int64_t batch = x.size(0), seq = x.size(1);
  const auto q_BHSD =
      queries(x).view({batch, seq, n_heads_, nope_dim_ + rope_dim_}).transpose(1, 2);
  const auto q_parts = q_BHSD.split_with_sizes({nope_dim_, rope_dim_}, -1);
  const auto latent_parts = project(x, wkv_a).split_with_sizes({kv_rank_, rope_dim_}, -1);
  const auto& latent_BSC = latent_parts[0];
  const auto kv_BHSD = project(kv_a_norm->forward(latent_BSC, latent_BSC.scalar_type()), wkv_b)
                           .view({batch, seq, n_heads_, nope_dim_ + v_dim_})
                           .transpose(1, 2);
  const auto kv_parts = kv_BHSD.split_with_sizes({nope_dim_, v_dim_}, -1);
  // One RoPE key per token, the same for every head.
  const auto k_rope_B1SR = apply_rope(latent_parts[1].unsqueeze(1), rope_);
  const auto q = torch::cat({q_parts[0], apply_rope(q_parts[1], rope_)}, -1);
  const auto k =
      torch::cat({kv_parts[0], k_rope_B1SR.expand({batch, n_heads_, seq, rope_dim_})}, -1);
  const auto context_BHSV = causal_attention(q, k, kv_parts[1], scale_);
  return project(context_BHSV.transpose(1, 2).reshape({batch, seq, n_heads_ * v_dim_}), wo);
}

}  // namespace moelab
