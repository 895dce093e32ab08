// Mixed-precision helpers shared by the model's layers. Parameters stay in the
// "master" dtype (fp32, or double in gradient checks); matmuls run in the
// compute dtype (bf16 when precision resolves to "bf16", else the master dtype).
#pragma once

#include <torch/torch.h>

#include <string>

namespace moelab {

// bf16 for precision "bf16", and for "auto" where bf16 is native on `device`
// (see precision.h); otherwise the dtype the parameters already have.
c10::ScalarType compute_dtype(const std::string& precision, c10::ScalarType master,
                              const torch::Device& device);

// x @ w^T with w cast to x's dtype; the cast's backward hands w an fp32 grad.
torch::Tensor project(const torch::Tensor& x, const torch::Tensor& w);

// Draws w [out, in] from normal(0, std) on a generator seeded by hash(seed, name),
// so a parameter's values depend only on its name, never on which rank builds it.
void init_normal_keyed(torch::Tensor& w, int64_t seed, const std::string& name, double std);

}  // namespace moelab
