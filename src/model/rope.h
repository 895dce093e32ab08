// Rotary position embedding, "rotate half" layout (GPT-NeoX / HF LLaMA): the
// head dimension is split into halves (x1, x2) and position p rotates pair
// (x1[i], x2[i]) by angle p * f_i, f_i = theta^(-2i / head_dim) unless
// model.rope_scaling stretches it (L = original_seq_len, s = factor):
//   "llama3" (Llama 3.1): by the pair's wavelength w = 2 pi / f_i, f_i is kept
//     where w < L / high_freq_factor, divided by s where w > L / low_freq_factor,
//     and in between (1 - a) f_i / s + a f_i, a = (L / w - low) / (high - low).
//   "yarn": f_i / s for the slow pairs, f_i for the fast ones, blended along a
//     ramp over i from dimension d(beta_fast) (all f_i) to d(beta_slow) (all
//     f_i / s), d(b) = head_dim ln(L / (2 pi b)) / (2 ln theta) (rounded out
//     to whole dimensions when truncate; within [0, head_dim - 1]). cos and
//     sin are also multiplied by the attention factor m, so q.k grows by m^2:
//     attention_factor if set, else mscale(s, mscale) / mscale(s, mscale_all_dim)
//     with both set, else mscale(s, 1), where mscale(s, c) = 0.1 c ln(s) + 1
//     (1 for s <= 1).
// These are transformers' _compute_llama3_parameters and _compute_yarn_parameters;
// DeepSeek's MLA also folds mscale_all_dim into the softmax scale
// (latent_softmax_factor).
#pragma once

#include <torch/torch.h>

#include "config/config.h"

namespace moelab {

struct RopeTables {
  torch::Tensor cos;  // [max_seq, head_dim], double
  torch::Tensor sin;
};

RopeTables make_rope_tables(int64_t max_seq, int64_t head_dim, double theta,
                            const RopeScaling& scaling = {});

// What DeepSeek's latent attention multiplies its softmax scale by: under yarn
// with mscale_all_dim set, mscale(factor, mscale_all_dim)^2 (transformers'
// yarn_apply_mscale), else 1.
double latent_softmax_factor(const RopeScaling& scaling);

// x: [B, H, S, head_dim] (the last dimension dense); uses the first S rows of
// the tables. Returns a contiguous [B, H, S, head_dim] (kernels/rope.h).
torch::Tensor apply_rope(const torch::Tensor& x, const RopeTables& tables);

}  // namespace moelab
