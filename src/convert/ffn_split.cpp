#include "convert/ffn_split.h"

#include <ATen/CPUGeneratorImpl.h>

#include <stdexcept>
#include <string>

#include "convert/balanced_assignment.h"

namespace moelab {

std::vector<FfnWeights> split_by_assignment(const FfnWeights& ffn,
                                            const std::vector<int64_t>& expert_of_unit,
                                            int64_t experts, double w2_scale) {
  const auto ids = torch::tensor(expert_of_unit, torch::kLong);
  std::vector<FfnWeights> out;
  for (int64_t e = 0; e < experts; ++e) {
    const auto units = (ids == e).nonzero().flatten().to(ffn.w1.device());
    if (units.numel() == 0) {
      throw std::invalid_argument("split_by_assignment: expert " + std::to_string(e) +
                                  " gets no units");
    }
    out.push_back({ffn.w1.index_select(0, units).clone(), ffn.w3.index_select(0, units).clone(),
                   ffn.w2.index_select(1, units) * w2_scale});
  }
  return out;
}

std::vector<int64_t> random_partition(int64_t units, int64_t experts, uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  const auto perm = torch::randperm(units, gen, torch::kLong);
  std::vector<int64_t> expert_of(static_cast<size_t>(units));
  const int64_t share = units / experts;
  for (int64_t i = 0; i < units; ++i) expert_of[size_t(perm[i].item<int64_t>())] = i / share;
  return expert_of;
}

torch::Tensor unit_features(const FfnWeights& ffn) {
  return torch::cat({ffn.w1, ffn.w3, ffn.w2.t()}, 1).to(torch::kFloat64);
}

std::vector<int64_t> cluster_partition(const FfnWeights& ffn, int64_t experts, int64_t iterations,
                                       uint64_t seed) {
  const auto x = unit_features(ffn);
  const int64_t n = x.size(0);
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  auto centroids = x.index_select(0, torch::randperm(n, gen, torch::kLong).slice(0, 0, experts));
  std::vector<int64_t> expert_of;
  for (int64_t it = 0; it < iterations; ++it) {
    const auto distance = torch::cdist(x, centroids).pow(2);
    auto next = balanced_assignment(-distance);
    if (next == expert_of) break;  // converged: the centroids would not move
    expert_of = std::move(next);
    const auto onehot = one_hot_assignment(expert_of, experts, x);  // [n, E]
    centroids = onehot.t().mm(x) / onehot.sum(0).unsqueeze(1);
  }
  return expert_of;
}

}  // namespace moelab
