// Expert-parallel token dispatch: each (token, slot) assignment travels to the
// rank of the EP group that holds its expert and the expert output comes back.
//
// dispatch: stable sort of assignments by global expert id -> per-expert counts
// -> exchange counts -> all-to-all-v of the rows -> regroup received rows from
// (source rank, expert) order to (local expert, source rank) order.
// combine: the exact reverse, then each token's rows summed, weighted by their
// gates (dropped (-1) assignments add nothing). Both exchanges are differentiable (AllToAllV).
// A group of one skips the exchanges: dispatch is then a local permutation.
// Each phase is a PhaseScope (permute, exchange, unpermute) that the benchmarks
// time and profiler traces show.
#pragma once

#include <memory>

#include "comm/communicator.h"
#include "model/token_dispatcher.h"
#include "model/token_permutation.h"

namespace moelab {

class AllToAllDispatcher : public TokenDispatcher {
 public:
  // ep_group: the ranks that split the experts; rank p holds placement[p]
  // (comm/expert_placement.h), the same number of experts on every rank.
  AllToAllDispatcher(std::shared_ptr<Communicator> ep_group,
                     std::vector<std::vector<int64_t>> placement);
  // Experts of equal width: rank p holds [p*E/ep, (p+1)*E/ep). num_experts
  // must be a multiple of the group size.
  AllToAllDispatcher(std::shared_ptr<Communicator> ep_group, int64_t num_experts);

  DispatchedTokens dispatch(const torch::Tensor& hidden, const torch::Tensor& expert_ids) override;
  torch::Tensor combine(const torch::Tensor& expert_out, const torch::Tensor& gates_TK) override;
  std::vector<int64_t> local_expert_ids() const override;
  std::vector<int64_t> expert_ranks(int64_t num_experts) const override;

 private:
  // What combine() needs from the dispatch before it.
  struct Routing {
    SortedAssignments sorted;
    torch::Tensor regroup, ungroup;             // received rows to expert order and back (ep > 1)
    std::vector<int64_t> send_rows, recv_rows;  // per EP rank
  };

  // The phases of dispatch, each timed as its Phase (model/phase_timer.h).
  // Assignments sorted by destination slot: the rows to send.
  torch::Tensor sort_for_sending(const torch::Tensor& hidden, const torch::Tensor& expert_ids,
                                 Routing& routing);
  // Counts, then rows, with every rank of the group; fills recv_counts.
  torch::Tensor exchange_rows(const torch::Tensor& send, Routing& routing,
                              std::vector<int64_t>& recv_counts);
  DispatchedTokens regroup_by_expert(const torch::Tensor& received,
                                     const std::vector<int64_t>& recv_counts,
                                     Routing& routing) const;

  std::shared_ptr<Communicator> group_;
  std::vector<std::vector<int64_t>> placement_;
  int64_t num_experts_;
  int64_t local_experts_;
  // Global expert id -> its slot: the position in the ranks' lists laid end to
  // end, so sorting by slot groups the rows by destination rank, then by the
  // destination's local expert.
  torch::Tensor slot_of_;
  bool identity_slots_ = false;
  std::unique_ptr<Routing> routing_;
};

}  // namespace moelab
