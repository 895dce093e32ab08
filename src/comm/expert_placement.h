// Which global experts an expert-parallel rank holds: rank p of a group of
// `ep_size` holds the contiguous block [p*E/ep, (p+1)*E/ep). The one place
// this rule lives, so dispatch, process groups and checkpoints agree.
#pragma once

#include <cstdint>
#include <vector>

namespace moelab {

inline std::vector<int64_t> experts_of_ep_rank(int64_t ep_rank, int64_t ep_size,
                                               int64_t num_experts) {
  const int64_t per_rank = num_experts / ep_size;
  std::vector<int64_t> ids(per_rank);
  for (int64_t i = 0; i < per_rank; ++i) ids[i] = ep_rank * per_rank + i;
  return ids;
}

}  // namespace moelab
