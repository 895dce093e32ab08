// Sums over each token's k slots (its k expert assignments), each slot's row
// read where the dispatch put it: the MoE layer's gate-weighted combine, and
// the gradient of a token's row gathered once per slot. index_TK[t, s] is the
// row of rows_ND that holds slot s of token t; an index of N or more adds
// nothing (an assignment dropped by capacity).
#pragma once

#include <ATen/core/Tensor.h>

namespace moelab {

// [T, d]: y[t] = sum over s of gates_TK[t, s] * rows_ND[index_TK[t, s]].
// Differentiable in rows and gates; the backward takes each row to be named by
// at most one slot (the rows are the slots', permuted), and gives rows named by
// none a zero gradient. On the CPU (float, double, bf16 with fp32 sums) one pass
// forward and one backward; elsewhere gather_weighted_slot_sum_reference.
at::Tensor gather_weighted_slot_sum(const at::Tensor& rows_ND, const at::Tensor& index_TK,
                                    const at::Tensor& gates_TK);

// The same as LibTorch ops: the rows gathered into [T, k, d] (a zero row for a
// dropped slot), then one batched matrix product with the gates.
at::Tensor gather_weighted_slot_sum_reference(const at::Tensor& rows_ND, const at::Tensor& index_TK,
                                              const at::Tensor& gates_TK);

// [T, d]: y[t] = sum over s of rows_ND[index_TK[t, s]], not differentiable (the
// backward of a gather of token rows). On the CPU one pass with fp32 sums;
// elsewhere the gather and a sum over slots.
at::Tensor gather_slot_sum(const at::Tensor& rows_ND, const at::Tensor& index_TK);

}  // namespace moelab
