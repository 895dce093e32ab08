// Mixed-precision helpers shared by the model's layers. Parameters stay in the
// "master" dtype (fp32, or double in gradient checks); matmuls run in the
// compute dtype (bf16 when precision resolves to "bf16", else the master dtype).
#pragma once

#include <torch/torch.h>

#include <string>

namespace moelab {

// x @ w^T with w cast to x's dtype; the cast's backward hands w an fp32 grad.
torch::Tensor project(const torch::Tensor& x, const torch::Tensor& w);
// x @ w^T + b in one GEMM (the bias its additive input), w and b cast to x's dtype.
torch::Tensor project(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b);

// Draws w [out, in] from normal(0, std) on a generator seeded by hash(seed, name),
// so a parameter's values depend only on its name, never on which rank builds it.
void init_normal_keyed(torch::Tensor& w, int64_t seed, const std::string& name, double std);

}  // namespace moelab
