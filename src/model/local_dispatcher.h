// TokenDispatcher for one rank holding all experts: a local permutation.
// dispatch() stable-sorts the (token, slot) assignments by expert id and
// gathers the token rows; combine() sums each token's expert outputs back.
#pragma once

#include "model/token_dispatcher.h"
#include "model/token_permutation.h"

namespace moelab {

class LocalDispatcher : public TokenDispatcher {
 public:
  explicit LocalDispatcher(int64_t num_experts);

  DispatchedTokens dispatch(const torch::Tensor& hidden, const torch::Tensor& expert_ids) override;
  torch::Tensor combine(const torch::Tensor& expert_out, const torch::Tensor& gates_TK) override;
  std::vector<int64_t> local_expert_ids() const override;

 private:
  int64_t num_experts_;
  SortedAssignments sorted_;  // from dispatch() to combine()
};

}  // namespace moelab
