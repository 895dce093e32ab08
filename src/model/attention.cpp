#include "model/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "model/compute.h"

namespace moelab {
namespace {

// Fused causal attention (flash kernels): the S x S scores are never stored,
// softmax statistics stay fp32, and grouped k/v heads are shared, not copied.
torch::Tensor fused_attention(const torch::Tensor& q, const torch::Tensor& k,
                              const torch::Tensor& v, double scale) {
  return at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, /*dropout_p=*/0.0,
                                          /*is_causal=*/true, scale,
                                          /*enable_gqa=*/k.size(1) != q.size(1));
}

}  // namespace

torch::Tensor causal_attention(const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, double scale) {
  // On the CPU the explicit form, in blocks of 128 queries, each seeing only
  // the keys up to its last (at S = 256, 3/4 of the full scores' FLOPs).
  // Measured on LibTorch 2.15 (bench_model, dense reference step, 2 threads,
  // AVX512-BF16 EPYC): 5% more tokens/s than the fused kernel in fp32 (one
  // block: 2%; 4 blocks: as 2), and level with one block in bf16, whose fused
  // backward is ~30% slower there. It stores the scores, B x H x S x S / 2;
  // CUDA keeps the fused (flash) kernel.
  const int64_t seq = q.size(2);
  return q.is_cpu() ? explicit_causal_attention(q, k, v, (seq + 127) / 128, scale)
                    : fused_attention(q, k, v, scale);
}

torch::Tensor explicit_causal_attention(const torch::Tensor& q, torch::Tensor k, torch::Tensor v,
                                        int64_t query_blocks, std::optional<double> scale) {
  const int64_t batch = q.size(0), heads = q.size(1), seq = q.size(2), hd = q.size(3);
  const int64_t hd_v = v.size(3);
  if (k.size(1) != heads) {
    k = k.repeat_interleave(heads / k.size(1), 1);
    v = v.repeat_interleave(heads / v.size(1), 1);
  }
  const auto q3 = q.reshape({-1, seq, hd}), k3 = k.reshape({-1, seq, hd}),
             v3 = v.reshape({-1, seq, hd_v});
  // The causal mask is the GEMM's additive input (beta 1) and the scale its
  // alpha, so neither is a pass of its own over the scores, forward or backward
  // (the mask is a constant: it gets no gradient).
  const auto mask =
      torch::full({seq, seq}, -std::numeric_limits<double>::infinity(), q.options()).triu(1);
  const int64_t block = (seq + query_blocks - 1) / std::max<int64_t>(query_blocks, 1);
  std::vector<torch::Tensor> contexts;
  for (int64_t start = 0; start < seq; start += block) {
    // Queries [start, end) see keys [0, end) only: the blocks above the diagonal are skipped.
    const int64_t end = std::min(start + block, seq);
    const auto scores = torch::baddbmm(
        mask.slice(0, start, end).slice(1, 0, end).expand({batch * heads, end - start, end}),
        q3.slice(1, start, end), k3.slice(1, 0, end).transpose(1, 2),
        /*beta=*/1.0, /*alpha=*/scale.value_or(1.0 / std::sqrt(double(hd))));
    // Softmax in the scores' dtype: ATen's CPU and CUDA kernels accumulate bf16
    // in fp32, and the probabilities go into a bf16 GEMM anyway.
    contexts.push_back(torch::bmm(torch::softmax(scores, -1), v3.slice(1, 0, end)));
  }
  return torch::cat(contexts, 1).view({batch, heads, seq, hd_v});
}

AttentionImpl::AttentionImpl(const ModelConfig& cfg)
    : n_heads_(cfg.n_heads),
      n_kv_heads_(cfg.kv_heads()),
      head_dim_(cfg.head_dim()),
      rope_(make_rope_tables(cfg.seq_len, cfg.head_dim(), cfg.rope_theta, cfg.rope_scaling)) {
  const int64_t d = cfg.d_model;
  wq = register_parameter("wq", torch::empty({n_heads_ * head_dim_, d}));
  wk = register_parameter("wk", torch::empty({n_kv_heads_ * head_dim_, d}));
  wv = register_parameter("wv", torch::empty({n_kv_heads_ * head_dim_, d}));
  wo = register_parameter("wo", torch::empty({d, n_heads_ * head_dim_}));
  if (cfg.qkv_bias) {
    bq = register_parameter("bq", torch::empty({n_heads_ * head_dim_}));
    bk = register_parameter("bk", torch::empty({n_kv_heads_ * head_dim_}));
    bv = register_parameter("bv", torch::empty({n_kv_heads_ * head_dim_}));
  }
  if (cfg.qk_norm != QkNorm::kNone) {
    norm_per_head_ = cfg.qk_norm == QkNorm::kHead;
    const int64_t q_dim = norm_per_head_ ? head_dim_ : n_heads_ * head_dim_;
    const int64_t k_dim = norm_per_head_ ? head_dim_ : n_kv_heads_ * head_dim_;
    q_norm = register_module("q_norm", RMSNorm(q_dim, cfg.norm_eps));
    k_norm = register_module("k_norm", RMSNorm(k_dim, cfg.norm_eps));
  }
}

torch::Tensor AttentionImpl::forward(const torch::Tensor& x) {
  const int64_t batch = x.size(0), seq = x.size(1);
  const int64_t q_width = n_heads_ * head_dim_, kv_width = n_kv_heads_ * head_dim_;
  // One matmul for q, k and v (the biases its additive input): the concats are
  // tiny next to the activations.
  const auto w_qkv = torch::cat({wq, wk, wv}, 0);
  const auto qkv = bq.defined() ? project(x, w_qkv, torch::cat({bq, bk, bv})) : project(x, w_qkv);
  // One split, not a narrow each: a narrow's backward writes a zero gradient
  // the width of all three and adds into it.
  const auto parts = qkv.split_with_sizes({q_width, kv_width, kv_width}, -1);
  // QK-norm before RoPE, over the whole projection or over each head's dims
  // (the last dim either way, before or after the split into heads).
  auto normed = [&](RMSNorm norm, const torch::Tensor& t, bool per_head) {
    return norm && norm_per_head_ == per_head ? norm->forward(t, t.scalar_type()) : t;
  };
  auto heads = [&](RMSNorm norm, const torch::Tensor& part, int64_t n) {
    const auto split = normed(norm, part, false).view({batch, seq, n, head_dim_});
    return normed(norm, split, true).transpose(1, 2);  // [B, H, S, hd]
  };
  const auto q = apply_rope(heads(q_norm, parts[0], n_heads_), rope_);
  const auto k = apply_rope(heads(k_norm, parts[1], n_kv_heads_), rope_);
  const auto v = heads(nullptr, parts[2], n_kv_heads_);
  const auto context = causal_attention(q, k, v, 1.0 / std::sqrt(double(head_dim_)));
  return project(context.transpose(1, 2).reshape({batch, seq, q_width}), wo);
}

}  // namespace moelab
