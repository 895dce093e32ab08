// The swappable middle of the MoE layer: route -> DISPATCH -> experts -> COMBINE.
// A dispatcher moves each (token, expert) assignment to the rank that holds the
// expert and brings the expert's output back. On one rank it is a local
// permutation (LocalDispatcher); across ranks an all-to-all (comm/).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

namespace moelab {

struct DispatchedTokens {
  // Rows grouped by local expert: the first counts[0] rows go to local expert 0, ...
  torch::Tensor tokens;
  std::vector<int64_t> counts;  // one entry per local expert
};

class TokenDispatcher {
 public:
  virtual ~TokenDispatcher() = default;

  // hidden: [T, d]. expert_ids: [T, k] int64 global expert ids; -1 marks an
  // assignment dropped by capacity (it is not sent anywhere).
  // Keeps whatever state combine() needs; one dispatch is followed by one combine.
  virtual DispatchedTokens dispatch(const torch::Tensor& hidden,
                                    const torch::Tensor& expert_ids) = 0;

  // expert_out: rows in the order dispatch() returned them; gates_TK: [T, k],
  // each assignment's weight, in expert_out's dtype. Returns [T, d]: each
  // token's expert outputs summed, weighted by their gates (a dropped
  // assignment adds nothing), in one pass that reads each output where it lies.
  // Differentiable with respect to expert_out, the gates and (through dispatch)
  // hidden.
  virtual torch::Tensor combine(const torch::Tensor& expert_out, const torch::Tensor& gates_TK) = 0;

  // Global ids of the experts this rank holds, in local-expert order.
  virtual std::vector<int64_t> local_expert_ids() const = 0;

  // For each of the num_experts global experts, the rank of the group that
  // holds it (what the MoE layer's ranks-per-token statistic counts); one rank
  // holds them all unless a dispatcher says otherwise.
  virtual std::vector<int64_t> expert_ranks(int64_t num_experts) const {
    return std::vector<int64_t>(size_t(num_experts), 0);
  }
};

}  // namespace moelab
