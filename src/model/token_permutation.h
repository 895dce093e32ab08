// The local half of token dispatch, shared by both dispatchers: sort the
// (token, slot) assignments by expert, gather the token rows in that order, and
// combine the expert outputs back into token rows. The gathers are autograd functions whose
// backward is again a gather through the inverse permutation: torch's index_select backward
// scatter-adds (index_add) into zeros, which on the CPU made the dispatcher's forward+backward 9x
// its forward.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

namespace moelab {

struct SortedAssignments {
  torch::Tensor order;          // [T*k] flat (token * k + slot) ids by expert, dropped last
  torch::Tensor unsort;         // [T*k] inverse of order
  std::vector<int64_t> counts;  // kept assignments per expert
  int64_t tokens = 0, slots = 0, kept = 0;
};

// expert_ids: [T, k] int64 in [-1, num_experts); -1 marks a dropped assignment.
// Stable: the rows of one expert stay in (token, slot) order.
SortedAssignments sort_assignments(const torch::Tensor& expert_ids, int64_t num_experts);

// [kept, d]: hidden's row of each kept assignment, in sorted order. Gradients of
// a token's slots are summed.
torch::Tensor gather_assignments(const torch::Tensor& hidden, const SortedAssignments& sorted);

// [T, d]: each token's expert outputs (expert_out: [kept, d], sorted order)
// summed, weighted by gates_TK [T, k]; a dropped assignment adds nothing.
// Differentiable in expert_out and the gates.
torch::Tensor combine_assignments(const torch::Tensor& expert_out, const torch::Tensor& gates_TK,
                                  const SortedAssignments& sorted);

// src.index_select(0, perm) for a permutation perm of src's rows whose inverse
// is `inverse`; the backward gathers through `inverse`.
torch::Tensor permute_rows(const torch::Tensor& src, const torch::Tensor& perm,
                           const torch::Tensor& inverse);

// The permutation that undoes `permutation`.
torch::Tensor inverse_permutation(const torch::Tensor& permutation);

}  // namespace moelab
