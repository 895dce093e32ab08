// Which global experts each rank of an expert-parallel group holds. The one
// place this rule lives, so dispatch, process groups and checkpoints agree.
// Every rank holds E/ep experts (each list in id order):
// - equal widths: rank p holds the contiguous block [p*E/ep, (p+1)*E/ep);
// - heterogeneous widths (moe.expert_widths): widest first, each expert goes
//   to the rank with the least total width that still has room (ties: the
//   lower rank), so the ranks hold about the same total width.
#pragma once

#include <cstdint>
#include <vector>

namespace moelab {

// widths: one per global expert; its size must be a multiple of ep_size.
std::vector<std::vector<int64_t>> place_experts(const std::vector<int64_t>& widths,
                                                int64_t ep_size);

// Rank ep_rank's block for num_experts experts of equal width.
std::vector<int64_t> experts_of_ep_rank(int64_t ep_rank, int64_t ep_size, int64_t num_experts);

}  // namespace moelab
