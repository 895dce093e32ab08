// The indices of each row's k largest values, as the router chooses experts.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace moelab {

// [rows, k] int64: row r's k largest entries of values_RC, largest first; NaN
// ranks above every number (as torch::topk), ties go to the lower index. On the
// CPU for float and double: fp32 rows of up to 256 values without NaN in AVX-512
// registers, 16 rows at a time one per lane where k <= 12 (each value inserted
// into its lane's best k), else k rounds of a max per row; other rows one
// insertion pass (torch::topk copies each row into (value, index) pairs and
// selects among them). Elsewhere torch::topk.
at::Tensor top_k_indices(const at::Tensor& values_RC, int64_t k);

}  // namespace moelab
