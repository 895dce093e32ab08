// Rotary position embedding, "rotate half" layout (GPT-NeoX / HF LLaMA): the
// head dimension is split into halves (x1, x2) and position p rotates pair
// (x1[i], x2[i]) by angle p * theta^(-2i / head_dim).
#pragma once

#include <torch/torch.h>

namespace moelab {

struct RopeTables {
  torch::Tensor cos;  // [max_seq, head_dim], double
  torch::Tensor sin;
};

RopeTables make_rope_tables(int64_t max_seq, int64_t head_dim, double theta);

// x: [B, H, S, head_dim] (the last dimension dense); uses the first S rows of
// the tables. Returns a contiguous [B, H, S, head_dim] (kernels/rope.h).
torch::Tensor apply_rope(const torch::Tensor& x, const RopeTables& tables);

}  // namespace moelab
