#include "model/attention.h"

#include "model/compute.h"

namespace moelab {

AttentionImpl::AttentionImpl(const Config& cfg)
    : n_heads_(cfg.model.n_heads),
      n_kv_heads_(cfg.kv_heads()),
      head_dim_(cfg.head_dim()),
      rope_(make_rope_tables(cfg.model.seq_len, cfg.head_dim(), cfg.model.rope_theta)) {
  const int64_t d = cfg.model.d_model;
  wq = register_parameter("wq", torch::empty({n_heads_ * head_dim_, d}));
  wk = register_parameter("wk", torch::empty({n_kv_heads_ * head_dim_, d}));
  wv = register_parameter("wv", torch::empty({n_kv_heads_ * head_dim_, d}));
  wo = register_parameter("wo", torch::empty({d, n_heads_ * head_dim_}));
}

torch::Tensor AttentionImpl::forward(const torch::Tensor& x) {
  const int64_t batch = x.size(0), seq = x.size(1);
  const int64_t q_width = n_heads_ * head_dim_, kv_width = n_kv_heads_ * head_dim_;
  // One matmul for q, k and v: the weight concat is tiny next to the activations.
  const auto qkv = project(x, torch::cat({wq, wk, wv}, 0));
  auto split_heads = [&](int64_t offset, int64_t heads) {
    return qkv.narrow(-1, offset, heads * head_dim_)
        .view({batch, seq, heads, head_dim_})
        .transpose(1, 2);  // [B, H, S, hd]
  };
  auto q = apply_rope(split_heads(0, n_heads_), rope_);
  auto k = apply_rope(split_heads(q_width, n_kv_heads_), rope_);
  auto v = split_heads(q_width + kv_width, n_kv_heads_);
  // Fused causal attention (flash kernels on CPU and GPU): the S x S scores are
  // never stored, softmax statistics stay in fp32 for bf16 inputs, and grouped
  // k/v heads are shared without being copied.
  const auto context = at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{},
                                                        /*dropout_p=*/0.0, /*is_causal=*/true,
                                                        /*scale=*/std::nullopt,
                                                        /*enable_gqa=*/n_kv_heads_ != n_heads_)
                           .transpose(1, 2)
                           .reshape({batch, seq, q_width});
  return project(context, wo);
}

}  // namespace moelab
