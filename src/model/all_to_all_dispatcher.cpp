#include "model/all_to_all_dispatcher.h"

#include <numeric>
#include <stdexcept>

#include "comm/all_to_all.h"
#include "comm/expert_placement.h"
#include "model/phase_timer.h"

namespace moelab {
namespace {

std::vector<int64_t> to_vector(const torch::Tensor& t) {
  const torch::Tensor host = t.to(torch::kCPU, torch::kLong).contiguous();
  return std::vector<int64_t>(host.data_ptr<int64_t>(), host.data_ptr<int64_t>() + host.numel());
}

// Sums of consecutive blocks of `block` values: per-rank totals of per-expert counts.
std::vector<int64_t> block_sums(const std::vector<int64_t>& values, int64_t block) {
  std::vector<int64_t> sums(values.size() / block, 0);
  for (size_t i = 0; i < values.size(); ++i) sums[i / block] += values[i];
  return sums;
}

}  // namespace

AllToAllDispatcher::AllToAllDispatcher(std::shared_ptr<Communicator> ep_group,
                                       std::vector<std::vector<int64_t>> placement)
    : group_(std::move(ep_group)), placement_(std::move(placement)), num_experts_(0) {
  if (int64_t(placement_.size()) != group_->size()) {
    throw std::invalid_argument("AllToAllDispatcher: placement for " +
                                std::to_string(placement_.size()) + " ranks, EP group of " +
                                std::to_string(group_->size()));
  }
  local_experts_ = static_cast<int64_t>(placement_.front().size());
  std::vector<int64_t> slots;
  for (const auto& ids : placement_) {
    if (int64_t(ids.size()) != local_experts_) {
      throw std::invalid_argument("AllToAllDispatcher: every rank must hold as many experts");
    }
    num_experts_ += local_experts_;
  }
  slots.assign(num_experts_, -1);
  int64_t slot = 0;
  for (const auto& ids : placement_) {
    for (int64_t gid : ids) slots.at(gid) = slot++;
  }
  // Contiguous blocks in id order (equal widths): every slot is its id, and
  // dispatch skips the map.
  identity_slots_ = true;
  for (int64_t gid = 0; gid < num_experts_; ++gid) identity_slots_ &= slots[gid] == gid;
  slots.push_back(num_experts_);  // for ids past the last expert: still invalid after the map
  slot_of_ = torch::tensor(slots, torch::kLong);
}

AllToAllDispatcher::AllToAllDispatcher(std::shared_ptr<Communicator> ep_group, int64_t num_experts)
    : AllToAllDispatcher(ep_group, [&] {
        if (num_experts < 1 || num_experts % ep_group->size() != 0) {
          throw std::invalid_argument("AllToAllDispatcher: " + std::to_string(num_experts) +
                                      " experts cannot be split over an EP group of " +
                                      std::to_string(ep_group->size()));
        }
        return place_experts(std::vector<int64_t>(num_experts, 1), ep_group->size());
      }()) {}

std::vector<int64_t> AllToAllDispatcher::local_expert_ids() const {
  return placement_[group_->rank()];
}

std::vector<int64_t> AllToAllDispatcher::expert_ranks(int64_t num_experts) const {
  std::vector<int64_t> ranks(size_t(num_experts), 0);
  for (size_t p = 0; p < placement_.size(); ++p) {
    for (int64_t e : placement_[p]) ranks[size_t(e)] = int64_t(p);
  }
  return ranks;
}

DispatchedTokens AllToAllDispatcher::dispatch(const torch::Tensor& hidden,
                                              const torch::Tensor& expert_ids) {
  if (hidden.dim() != 2 || expert_ids.dim() != 2 || expert_ids.size(0) != hidden.size(0) ||
      expert_ids.scalar_type() != torch::kLong) {
    throw std::invalid_argument(
        "AllToAllDispatcher::dispatch: expects hidden [T, d] and int64 "
        "expert_ids [T, k] with the same T");
  }
  auto routing = std::make_unique<Routing>();
  const torch::Tensor send = sort_for_sending(hidden, expert_ids, *routing);
  if (group_->size() == 1) {
    // A group of one holds every expert: the sorted rows already are the batches.
    routing->recv_rows = routing->send_rows;
    std::vector<int64_t> counts = routing->sorted.counts;
    routing_ = std::move(routing);
    return {send, std::move(counts)};
  }
  std::vector<int64_t> recv_counts;
  const torch::Tensor received = exchange_rows(send, *routing, recv_counts);
  DispatchedTokens out = regroup_by_expert(received, recv_counts, *routing);
  routing_ = std::move(routing);
  return out;
}

torch::Tensor AllToAllDispatcher::sort_for_sending(const torch::Tensor& hidden,
                                                   const torch::Tensor& expert_ids,
                                                   Routing& routing) {
  PhaseScope phase(Phase::kPermute);
  torch::Tensor slots = expert_ids;
  if (!identity_slots_) {
    if (slot_of_.device() != expert_ids.device()) slot_of_ = slot_of_.to(expert_ids.device());
    // Negative ids (-1: dropped) stay as they are; ids past the last expert map
    // to E; sort_assignments rejects both kinds of bad id in its one read-back.
    slots = torch::where(
        expert_ids < 0, expert_ids,
        slot_of_.index_select(0, expert_ids.clamp(0, num_experts_).flatten()).view_as(expert_ids));
  }
  routing.sorted = sort_assignments(slots, num_experts_);
  routing.send_rows = block_sums(routing.sorted.counts, local_experts_);
  return gather_assignments(hidden, routing.sorted);
}

torch::Tensor AllToAllDispatcher::exchange_rows(const torch::Tensor& send, Routing& routing,
                                                std::vector<int64_t>& recv_counts) {
  PhaseScope phase(Phase::kExchange);
  // recv_counts[src * local_experts + e]: rows source rank src sends for local expert e.
  const torch::Tensor recv_count_tensor = group_->all_to_all_v(
      torch::tensor(routing.sorted.counts, torch::kLong).view({num_experts_, 1}).to(send.device()),
      std::vector<int64_t>(group_->size(), local_experts_),
      std::vector<int64_t>(group_->size(), local_experts_));
  recv_counts = to_vector(recv_count_tensor);
  routing.recv_rows = block_sums(recv_counts, local_experts_);
  return all_to_all_v(send, group_, routing.send_rows, routing.recv_rows);
}

DispatchedTokens AllToAllDispatcher::regroup_by_expert(const torch::Tensor& received,
                                                       const std::vector<int64_t>& recv_counts,
                                                       Routing& routing) const {
  PhaseScope phase(Phase::kPermute);
  // Rows arrive as (source, expert) blocks; the experts want (expert, source).
  const int64_t ep = group_->size();
  const torch::Tensor block_key =
      torch::arange(local_experts_, torch::kLong).mul(ep).view({1, -1}) +
      torch::arange(ep, torch::kLong).view({-1, 1});
  const torch::Tensor row_key =
      torch::repeat_interleave(block_key.reshape({-1}), torch::tensor(recv_counts, torch::kLong));
  routing.regroup =
      std::get<1>(torch::sort(row_key, /*stable=*/true, 0, false)).to(received.device());
  routing.ungroup = inverse_permutation(routing.regroup);

  DispatchedTokens out;
  out.tokens = permute_rows(received, routing.regroup, routing.ungroup);
  out.counts.assign(local_experts_, 0);
  for (size_t i = 0; i < recv_counts.size(); ++i) out.counts[i % local_experts_] += recv_counts[i];
  return out;
}

torch::Tensor AllToAllDispatcher::combine(const torch::Tensor& expert_out,
                                          const torch::Tensor& gates_TK) {
  if (!routing_) throw std::logic_error("AllToAllDispatcher::combine called without a dispatch");
  const std::unique_ptr<Routing> routing = std::move(routing_);
  const int64_t received =
      std::accumulate(routing->recv_rows.begin(), routing->recv_rows.end(), int64_t{0});
  if (expert_out.dim() != 2 || expert_out.size(0) != received) {
    throw std::invalid_argument("AllToAllDispatcher::combine: expects [" +
                                std::to_string(received) + ", d] rows in dispatch order");
  }
  torch::Tensor returned = expert_out;
  if (group_->size() > 1) {
    torch::Tensor by_source;
    {
      PhaseScope phase(Phase::kUnpermute);
      by_source = permute_rows(expert_out, routing->ungroup, routing->regroup);
    }
    PhaseScope phase(Phase::kExchange);
    returned = all_to_all_v(by_source, group_, routing->recv_rows, routing->send_rows);
  }
  PhaseScope phase(Phase::kUnpermute);
  return combine_assignments(returned, gates_TK, routing->sorted);
}

}  // namespace moelab
