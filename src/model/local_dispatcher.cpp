#include "model/local_dispatcher.h"

namespace moelab {

LocalDispatcher::LocalDispatcher(int64_t num_experts) : num_experts_(num_experts) {}

DispatchedTokens LocalDispatcher::dispatch(const torch::Tensor& hidden,
                                           const torch::Tensor& expert_ids) {
  sorted_ = sort_assignments(expert_ids, num_experts_);
  return {gather_assignments(hidden, sorted_), sorted_.counts};
}

torch::Tensor LocalDispatcher::combine(const torch::Tensor& expert_out,
                                       const torch::Tensor& gates_TK) {
  return combine_assignments(expert_out, gates_TK, sorted_);
}

std::vector<int64_t> LocalDispatcher::local_expert_ids() const {
  std::vector<int64_t> ids(num_experts_);
  for (int64_t i = 0; i < num_experts_; ++i) ids[i] = i;
  return ids;
}

}  // namespace moelab
