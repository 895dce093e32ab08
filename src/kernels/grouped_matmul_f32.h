// grouped_matmul's fp32 CPU kernel (AVX-512F): every group's GEMM in one
// parallel loop of register tiles, forward and backward, where LibTorch runs
// one small GEMM per group and fine-grained experts pay its per-call cost many
// times a layer. Each output element is one fp32 FMA chain over the reduction
// in order, whichever group or row count it comes with.
#pragma once

#include <torch/torch.h>

#include <vector>

namespace moelab {

// Whether the CPU and the build have it.
bool grouped_matmul_f32_available();

// grouped_matmul for fp32 CPU tensors with K and N (all the weight parts'
// columns) multiples of 16, on a CPU where grouped_matmul_f32_available();
// differentiable in x and each part. The parts (the experts' gate and up,
// transposed views of their stacks) are joined once, transposed into B's
// rows; the backward reads the stacks as they are and writes each part's
// gradient in its stack's layout.
torch::Tensor grouped_matmul_f32(const torch::Tensor& x, at::TensorList w_parts,
                                 const std::vector<int64_t>& counts);

}  // namespace moelab
