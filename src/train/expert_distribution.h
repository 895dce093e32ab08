// Distributions over experts (shares of routed assignments) and how far two
// are apart: what routing analysis reports. Logarithms are natural (nats).
#pragma once

#include <cstdint>
#include <vector>

namespace moelab {

// counts / their sum; all zeros when nothing was counted.
std::vector<double> shares_of(const std::vector<int64_t>& counts);

// -sum_i p_i ln p_i, with 0 ln 0 = 0: 0 for one expert, ln E for uniform.
double entropy_nats(const std::vector<double>& p);

// Jensen-Shannon divergence (KL(p||m) + KL(q||m)) / 2 with m = (p + q) / 2:
// symmetric, 0 for equal distributions, at most ln 2 for disjoint ones.
double jensen_shannon_nats(const std::vector<double>& p, const std::vector<double>& q);

// The ids of the `n` largest shares, largest first (ties: lower id first).
std::vector<int64_t> top_experts(const std::vector<double>& p, int64_t n);

}  // namespace moelab
