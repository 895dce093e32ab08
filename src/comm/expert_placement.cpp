#include "comm/expert_placement.h"

#include <algorithm>
#include <numeric>

namespace moelab {

std::vector<std::vector<int64_t>> place_experts(const std::vector<int64_t>& widths,
                                                int64_t ep_size) {
  const int64_t experts = static_cast<int64_t>(widths.size());
  const int64_t per_rank = experts / ep_size;
  std::vector<std::vector<int64_t>> placement(ep_size);
  const bool uniform =
      std::all_of(widths.begin(), widths.end(), [&](int64_t w) { return w == widths.front(); });
  if (uniform) {
    for (int64_t p = 0; p < ep_size; ++p) placement[p] = experts_of_ep_rank(p, ep_size, experts);
    return placement;
  }
  std::vector<int64_t> order(experts);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return widths[a] > widths[b]; });
  std::vector<int64_t> load(ep_size, 0);
  for (int64_t e : order) {
    int64_t best = -1;
    for (int64_t p = 0; p < ep_size; ++p) {
      if (int64_t(placement[p].size()) == per_rank) continue;
      if (best < 0 || load[p] < load[best]) best = p;
    }
    placement[best].push_back(e);
    load[best] += widths[e];
  }
  for (auto& ids : placement) std::sort(ids.begin(), ids.end());
  return placement;
}

std::vector<int64_t> experts_of_ep_rank(int64_t ep_rank, int64_t ep_size, int64_t num_experts) {
  const int64_t per_rank = num_experts / ep_size;
  std::vector<int64_t> ids(per_rank);
  for (int64_t i = 0; i < per_rank; ++i) ids[i] = ep_rank * per_rank + i;
  return ids;
}

}  // namespace moelab
