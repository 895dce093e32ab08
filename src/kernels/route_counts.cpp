#include "kernels/route_counts.h"

#include <torch/torch.h>

#include <algorithm>
#include <vector>

namespace moelab {
namespace {

// Whether rank r is among the first n of a token's ranks.
bool seen(const int64_t* ranks, int64_t n, int64_t r) {
  return std::find(ranks, ranks + n, r) != ranks + n;
}

// A token's distinct ranks among its kept assignments (kept ids >= 0), with
// ranks_out room for k of them.
int64_t distinct_ranks(const int64_t* kept, int64_t k, const int64_t* rank_of, int64_t* ranks_out) {
  int64_t n = 0;
  for (int64_t s = 0; s < k; ++s) {
    if (kept[s] < 0) continue;
    const int64_t r = rank_of[kept[s]];
    if (!seen(ranks_out, n, r)) ranks_out[n++] = r;
  }
  return n;
}

RouteCounts cpu_route_counts(const at::Tensor& chosen_in, const at::Tensor& kept_in,
                             const at::Tensor& rank_in) {
  const auto chosen = chosen_in.contiguous(), kept = kept_in.contiguous();
  const auto rank_of = rank_in.contiguous();
  const int64_t tokens = kept.size(0), k = kept.size(1), experts = rank_of.numel();
  RouteCounts out{torch::zeros({experts}, torch::kLong), torch::zeros({experts}, torch::kLong),
                  torch::zeros({}, torch::kLong), torch::zeros({}, torch::kLong)};
  int64_t *chosen_n = out.chosen_E.data_ptr<int64_t>(), *kept_n = out.kept_E.data_ptr<int64_t>();
  const int64_t *c = chosen.data_ptr<int64_t>(), *kp = kept.data_ptr<int64_t>();
  std::vector<int64_t> ranks(k);
  int64_t dropped = 0, reached = 0;
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t s = t * k; s < (t + 1) * k; ++s) {
      TORCH_CHECK(c[s] >= 0 && c[s] < experts && kp[s] >= -1 && kp[s] < experts,
                  "route_counts: assignment ", s, " names expert ", c[s], " (kept ", kp[s],
                  "), outside [0, ", experts, ")");
      ++chosen_n[c[s]];
      if (kp[s] < 0) {
        ++dropped;
      } else {
        ++kept_n[kp[s]];
      }
    }
    reached += distinct_ranks(kp + t * k, k, rank_of.data_ptr<int64_t>(), ranks.data());
  }
  out.dropped.fill_(dropped);
  out.ranks_reached.fill_(reached);
  return out;
}

}  // namespace

RouteCounts route_counts(const at::Tensor& chosen_TK, const at::Tensor& kept_TK,
                         const at::Tensor& rank_of_expert_E) {
  TORCH_CHECK(chosen_TK.dim() == 2 && chosen_TK.sizes() == kept_TK.sizes() &&
                  chosen_TK.scalar_type() == torch::kLong &&
                  kept_TK.scalar_type() == torch::kLong &&
                  rank_of_expert_E.scalar_type() == torch::kLong,
              "route_counts: expected int64 chosen and kept ids [T, k] and ranks [E], got ",
              chosen_TK.sizes(), ", ", kept_TK.sizes(), " and ", rank_of_expert_E.sizes());
  const bool cpu = chosen_TK.device().is_cpu() && kept_TK.device().is_cpu() &&
                   rank_of_expert_E.device().is_cpu();
  if (!cpu) return route_counts_reference(chosen_TK, kept_TK, rank_of_expert_E);
  return cpu_route_counts(chosen_TK, kept_TK, rank_of_expert_E);
}

RouteCounts route_counts_reference(const at::Tensor& chosen_TK, const at::Tensor& kept_TK,
                                   const at::Tensor& rank_of_expert_E) {
  const int64_t experts = rank_of_expert_E.numel();
  const int64_t ranks = experts == 0 ? 0 : rank_of_expert_E.max().item<int64_t>() + 1;
  RouteCounts out;
  out.chosen_E = chosen_TK.reshape(-1).bincount({}, experts);
  // A dropped assignment (-1) lands in bin 0, left out.
  out.kept_E = (kept_TK.reshape(-1) + 1).bincount({}, experts + 1).narrow(0, 1, experts);
  out.dropped = (kept_TK < 0).sum();
  const auto rank_TK = rank_of_expert_E.to(kept_TK.device())
                           .index_select(0, kept_TK.clamp_min(0).reshape(-1))
                           .view(kept_TK.sizes());
  // Column 0 collects the dropped assignments, column r + 1 rank r.
  const auto column_TK = torch::where(kept_TK >= 0, rank_TK + 1, torch::zeros_like(kept_TK));
  out.ranks_reached = torch::zeros({kept_TK.size(0), ranks + 1}, kept_TK.options())
                          .scatter_(1, column_TK, 1)
                          .narrow(1, 1, ranks)
                          .sum();
  return out;
}

}  // namespace moelab
