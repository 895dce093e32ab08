#include "model/local_dispatcher.h"

namespace moelab {

LocalDispatcher::LocalDispatcher(int64_t num_experts) : num_experts_(num_experts) {}

DispatchedTokens LocalDispatcher::dispatch(const torch::Tensor& hidden,
                                           const torch::Tensor& expert_ids) {
  num_tokens_ = expert_ids.size(0);
  top_k_ = expert_ids.size(1);
  const auto flat = expert_ids.reshape(-1);
  // Stable, so rows of one expert stay in token order; dropped (-1) sort first.
  const auto sorted = flat.sort(/*stable=*/true, /*dim=*/0, /*descending=*/false);
  const auto& sorted_ids = std::get<0>(sorted);
  const auto& order = std::get<1>(sorted);
  const int64_t dropped = (flat < 0).sum().item<int64_t>();
  assignment_index_ = order.narrow(0, dropped, order.size(0) - dropped);
  const auto counts_tensor =
      sorted_ids.narrow(0, dropped, order.size(0) - dropped).bincount({}, num_experts_);
  const auto* counts_ptr = counts_tensor.data_ptr<int64_t>();
  DispatchedTokens out;
  out.counts.assign(counts_ptr, counts_ptr + num_experts_);
  out.tokens = hidden.index_select(0, assignment_index_.div(top_k_, "floor"));
  return out;
}

torch::Tensor LocalDispatcher::combine(const torch::Tensor& expert_out) {
  const int64_t d = expert_out.size(1);
  return torch::zeros({num_tokens_ * top_k_, d}, expert_out.options())
      .index_copy(0, assignment_index_, expert_out)
      .view({num_tokens_, top_k_, d});
}

std::vector<int64_t> LocalDispatcher::local_expert_ids() const {
  std::vector<int64_t> ids(num_experts_);
  for (int64_t i = 0; i < num_experts_; ++i) ids[i] = i;
  return ids;
}

}  // namespace moelab
