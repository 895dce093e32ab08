// What the MoE layer's routing statistics count, in one pass over a batch's
// [T, k] assignments on the CPU, instead of a bincount, a comparison and sum,
// and a scatter of each token's ranks, each its own pass (and on the ranks'
// side its own [T, ranks + 1] table).
#pragma once

#include <ATen/core/Tensor.h>

namespace moelab {

struct RouteCounts {
  at::Tensor chosen_E;       // [E] int64: assignments that chose each expert
  at::Tensor kept_E;         // [E] int64: assignments each expert kept
  at::Tensor dropped;        // [] int64: assignments dropped (kept id -1)
  at::Tensor ranks_reached;  // [] int64: summed over tokens, the distinct ranks
                             // holding a token's kept experts
};

// chosen_TK: the router's expert ids in [0, E); kept_TK: the same with -1 where
// capacity dropped one; rank_of_expert_E: the expert-parallel rank holding
// each expert. The CPU loop where all three are on the CPU; elsewhere the
// composition below.
RouteCounts route_counts(const at::Tensor& chosen_TK, const at::Tensor& kept_TK,
                         const at::Tensor& rank_of_expert_E);

// The same from LibTorch ops (bincount, and a scatter into a [T, ranks + 1]
// table whose column 0 collects the dropped assignments).
RouteCounts route_counts_reference(const at::Tensor& chosen_TK, const at::Tensor& kept_TK,
                                   const at::Tensor& rank_of_expert_E);

}  // namespace moelab
