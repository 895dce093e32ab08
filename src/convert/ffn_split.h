// A dense SwiGLU FFN cut into experts. Hidden unit u of the FFN is row u of w1
// and w3 and column u of w2, and the FFN's output is the sum over units, so
// experts made of disjoint unit sets that cover all units add up to the FFN
// exactly; experts made of copies or slices (upcycling) need a gate or scale to
// do so.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

namespace moelab {

struct FfnWeights {
  torch::Tensor w1, w3;  // [hidden, d]
  torch::Tensor w2;      // [d, hidden]
  int64_t width() const { return w1.size(0); }
};

// Expert e takes the units u with expert_of_unit[u] == e, in ascending order,
// its w2 multiplied by w2_scale. Every expert must get units.
std::vector<FfnWeights> split_by_assignment(const FfnWeights& ffn,
                                            const std::vector<int64_t>& expert_of_unit,
                                            int64_t experts, double w2_scale = 1.0);

// `random`: units shuffled by `seed`, then dealt out in equal consecutive shares.
std::vector<int64_t> random_partition(int64_t units, int64_t experts, uint64_t seed);

// `cluster`: balanced k-means on the units' weight vectors (w1 row, w3 row and
// w2 column, concatenated): centroids start at `experts` units drawn by `seed`;
// each of `iterations` rounds assigns units by balanced_assignment of the
// negative squared distances, then moves every centroid to its units' mean.
std::vector<int64_t> cluster_partition(const FfnWeights& ffn, int64_t experts, int64_t iterations,
                                       uint64_t seed);

// The [hidden, 3d] vectors that cluster_partition groups.
torch::Tensor unit_features(const FfnWeights& ffn);

}  // namespace moelab
