// The SwiGLU activation: silu(a) * b for gate_up = [a | b] along the last dimension.
#pragma once

#include <torch/torch.h>

namespace moelab {

// gate_up: [..., 2h] -> [..., h]. On the CPU one pass forward, and one backward
// that writes the [..., 2h] gradient directly (no split, silu and product
// gradients, no concatenation); elsewhere, or for dtypes the kernel does not
// cover, swiglu_reference.
torch::Tensor swiglu(const torch::Tensor& gate_up);

// The plain LibTorch composition: the kernel's reference in tests.
torch::Tensor swiglu_reference(const torch::Tensor& gate_up);

}  // namespace moelab
