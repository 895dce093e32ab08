// Balanced assignment of n units (an FFN's hidden units) to E experts, each
// expert taking exactly n / E of them: the soft version by Sinkhorn-Knopp
// (differentiable, for DOT-MoE's learned assignment), the hard one by greedy
// rounding of a score matrix (for DOT's forward pass and balanced k-means).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

namespace moelab {

// The entropic optimal-transport plan P = diag(u) exp(scores / temperature)
// diag(v) of scores [n, E] whose rows sum to 1 (every unit goes somewhere) and
// whose columns sum to n / E (every expert gets its share): `iterations`
// alternating row and column scalings in the log domain, computed in float64
// and returned in scores' dtype. Differentiable with respect to scores.
torch::Tensor sinkhorn(const torch::Tensor& scores, double temperature, int64_t iterations);

// Each unit's expert: every expert gets exactly n / E units, taken greedily in
// descending order of scores [n, E] (a unit goes to its best expert with room
// left). n must be a multiple of E.
std::vector<int64_t> balanced_assignment(const torch::Tensor& scores);

// The assignment as a one-hot [n, E] matrix in `like`'s dtype and device.
torch::Tensor one_hot_assignment(const std::vector<int64_t>& expert_of_unit, int64_t experts,
                                 const torch::Tensor& like);

}  // namespace moelab
