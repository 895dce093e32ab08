#include "model/attention.h"

#include <cmath>
#include <limits>

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
  if (n_kv_heads_ != n_heads_) {
    const int64_t group = n_heads_ / n_kv_heads_;
    auto repeat_kv = [&](const torch::Tensor& t) {
      return t.unsqueeze(2)
          .expand({batch, n_kv_heads_, group, seq, head_dim_})
          .reshape({batch, n_heads_, seq, head_dim_});
    };
    k = repeat_kv(k);
    v = repeat_kv(v);
  }
  // Scaling q (S x hd) is cheaper than scaling the scores (S x S); the mask is
  // applied in place since matmul's backward does not need its output.
  auto scores = torch::matmul(q * (1.0 / std::sqrt(double(head_dim_))), k.transpose(-2, -1));
  const auto future = torch::ones({seq, seq}, torch::kBool).triu(1);
  scores.masked_fill_(future, -std::numeric_limits<double>::infinity());
  // Softmax statistics in fp32 (or double) even when the matmuls run in bf16.
  const auto stat_dtype = x.scalar_type() == torch::kBFloat16 ? torch::kFloat32 : x.scalar_type();
  const auto probs = torch::softmax(scores, -1, stat_dtype).to(x.scalar_type());
  const auto context = torch::matmul(probs, v).transpose(1, 2).reshape({batch, seq, q_width});
  return project(context, wo);
}

}  // namespace moelab
