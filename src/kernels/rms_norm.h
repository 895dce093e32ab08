// RMSNorm over the last dimension: y = x / sqrt(mean(x^2) + eps) * weight, with
// the statistics in fp32 (fp64 for double input) and y in out_dtype.
#pragma once

#include <torch/torch.h>

namespace moelab {

// On the CPU one pass over x forward and one backward (the composition makes
// six forward and more backward). Elsewhere, or for dtypes the kernel does not
// cover, rms_norm_reference.
torch::Tensor rms_norm(const torch::Tensor& x, const torch::Tensor& weight, double eps,
                       c10::ScalarType out_dtype);

// The plain LibTorch composition: the kernel's reference in tests.
torch::Tensor rms_norm_reference(const torch::Tensor& x, const torch::Tensor& weight, double eps,
                                 c10::ScalarType out_dtype);

}  // namespace moelab
