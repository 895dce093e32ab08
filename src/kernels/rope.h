// Rotary position embedding, "rotate half" layout (GPT-NeoX / HF LLaMA): the head
// dimension splits into halves (x1, x2) and position p rotates each pair
// (x1[i], x2[i]) by the angle in the tables' row p.
#pragma once

#include <torch/torch.h>

namespace moelab {

// x: [B, H, S, hd], any strides with the last dimension dense (e.g. a head view of
// a fused qkv projection); cos, sin: [>= S, hd], the two halves of a row equal.
// Returns a contiguous [B, H, S, hd] in x's dtype. On the CPU one pass forward and
// one backward; elsewhere, or for dtypes the kernel does not cover, rope_reference.
torch::Tensor rope(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin);

// The plain LibTorch composition: the kernel's reference in tests.
torch::Tensor rope_reference(const torch::Tensor& x, const torch::Tensor& cos,
                             const torch::Tensor& sin);

}  // namespace moelab
