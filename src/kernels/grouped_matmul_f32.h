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

// Whether the kernel takes x [rows, K] with these weight parts [E, K, N_i]: all
// fp32 on the CPU, K and N (the parts' columns together) multiples of 16, on
// a CPU where grouped_matmul_f32_available().
bool grouped_matmul_f32_takes(const torch::Tensor& x, at::TensorList w_parts);

// grouped_matmul for operands that grouped_matmul_f32_takes, differentiable in
// x and each part. The parts (the experts' gate and up, transposed views of
// their stacks) are joined once, transposed into B's rows; the backward reads
// the stacks as they are and writes each part's gradient in its stack's layout.
torch::Tensor grouped_matmul_f32(const torch::Tensor& x, at::TensorList w_parts,
                                 const std::vector<int64_t>& counts);

}  // namespace moelab
