// Sums over each token's k slots (its k expert assignments): the MoE layer's
// gate-weighted combine, and the gradient of a token's row gathered once per slot.
#pragma once

#include <ATen/core/Tensor.h>

namespace moelab {

// [T, d]: y[t] = sum over s of gates_TK[t, s] * per_slot_TKD[t, s]. Differentiable
// in both. On the CPU (float, double, bf16 with fp32 sums) one pass forward and
// one backward; elsewhere weighted_slot_sum_reference.
at::Tensor weighted_slot_sum(const at::Tensor& per_slot_TKD, const at::Tensor& gates_TK);

// The same as one batched matrix product (torch::bmm): the kernel's reference.
at::Tensor weighted_slot_sum_reference(const at::Tensor& per_slot_TKD, const at::Tensor& gates_TK);

// [T, d]: y[t] = sum over s of rows_ND[index_TK[t, s]], where an index of N or
// more adds nothing (an assignment dropped by capacity). Not differentiable: the
// backward of a gather of token rows. On the CPU one pass with fp32 sums;
// elsewhere an index_select of the rows (zeros appended) and a sum over slots.
at::Tensor gather_slot_sum(const at::Tensor& rows_ND, const at::Tensor& index_TK);

}  // namespace moelab
