#include "convert/balanced_assignment.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <string>

namespace moelab {

torch::Tensor sinkhorn(const torch::Tensor& scores, double temperature, int64_t iterations) {
  TORCH_CHECK(scores.dim() == 2, "sinkhorn: scores must be [units, experts]");
  const int64_t n = scores.size(0), experts = scores.size(1);
  auto log_k = scores.to(torch::kFloat64) / temperature;
  const double log_row = 0.0;  // each row sums to 1
  const double log_col = std::log(double(n) / double(experts));
  auto log_u = torch::zeros({n, 1}, log_k.options());
  auto log_v = torch::zeros({1, experts}, log_k.options());
  for (int64_t i = 0; i < iterations; ++i) {
    log_u = log_row - torch::logsumexp(log_k + log_v, 1, /*keepdim=*/true);
    log_v = log_col - torch::logsumexp(log_k + log_u, 0, /*keepdim=*/true);
  }
  return (log_k + log_u + log_v).exp().to(scores.scalar_type());
}

std::vector<int64_t> balanced_assignment(const torch::Tensor& scores) {
  const int64_t n = scores.size(0), experts = scores.size(1);
  if (experts <= 0 || n % experts != 0) {
    throw std::invalid_argument("balanced_assignment: " + std::to_string(n) +
                                " units do not split evenly over " + std::to_string(experts) +
                                " experts");
  }
  const auto flat = scores.detach().to(torch::kCPU, torch::kFloat64).contiguous();
  const double* s = flat.data_ptr<double>();
  std::vector<int64_t> order(size_t(n * experts));
  std::iota(order.begin(), order.end(), 0);
  // Stable: equal scores go by unit, then expert, so the result is deterministic.
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return s[a] > s[b]; });
  std::vector<int64_t> expert_of(size_t(n), -1), room(size_t(experts), n / experts);
  int64_t left = n;
  for (int64_t idx : order) {
    const int64_t unit = idx / experts, e = idx % experts;
    if (expert_of[size_t(unit)] >= 0 || room[size_t(e)] == 0) continue;
    expert_of[size_t(unit)] = e;
    --room[size_t(e)];
    if (--left == 0) break;
  }
  return expert_of;
}

torch::Tensor one_hot_assignment(const std::vector<int64_t>& expert_of_unit, int64_t experts,
                                 const torch::Tensor& like) {
  const auto ids = torch::tensor(expert_of_unit, torch::kLong).to(like.device());
  return torch::one_hot(ids, experts).to(like.scalar_type());
}

}  // namespace moelab
