#include "model/moe_layer.h"

#include "kernels/route_counts.h"
#include "model/activation_checkpoint.h"
#include "model/compute.h"
#include "model/phase_timer.h"

namespace moelab {

MoeLayerImpl::MoeLayerImpl(int64_t d, const MoeConfig& moe,
                           std::shared_ptr<TokenDispatcher> dispatcher, ReduceMean reduce_mean)
    : dispatcher_(std::move(dispatcher)),
      reduce_mean_(std::move(reduce_mean)),
      balance_(moe.balance),
      aux_coef_(moe.aux_loss_coef),
      z_coef_(moe.z_loss_coef),
      bias_rate_(moe.bias_update_rate) {
  router = register_module(
      "router", Router(d, moe.num_experts, moe.top_k, moe.gate, moe.capacity_factor,
                       moe.drop_policy, balance_ == Balance::kAuxFree, moe.score, moe.route_scale,
                       GroupLimit{moe.n_groups, moe.topk_groups, moe.group_score}));
  const auto ranks = dispatcher_->expert_ranks(moe.num_experts);
  expert_rank_ = torch::tensor(ranks, torch::kLong);  // a statistic's map, not a buffer
  const auto ids = dispatcher_->local_expert_ids();
  std::vector<int64_t> widths;
  for (int64_t gid : ids) widths.push_back(moe.expert_width(gid));
  experts = register_module("experts", Experts(d, widths, ids));
  if (moe.shared_width() > 0) {
    shared = register_module("shared", SwiGLU(d, moe.shared_width()));
    if (moe.shared_expert_gate) {
      shared_gate = register_parameter("shared_gate", torch::empty({1, d}));
    }
  }
}

torch::Tensor MoeLayerImpl::sequence_balance_loss(const RouterOutput& route,
                                                  int64_t seq_len) const {
  const int64_t tokens = route.probs.size(0);
  const int64_t experts = router->num_experts();
  if (seq_len <= 0) seq_len = tokens;
  const int64_t sequences = tokens / seq_len;
  const int64_t k = router->top_k();
  torch::Tensor fraction;  // [B, E] share of each sequence's assignments
  {
    torch::NoGradGuard no_grad;
    const auto sequence =
        torch::arange(sequences, route.expert_ids.options()).repeat_interleave(seq_len * k);
    fraction = (sequence * experts + route.expert_ids.reshape(-1))
                   .bincount({}, sequences * experts)
                   .view({sequences, experts})
                   .to(route.probs.scalar_type()) /
               static_cast<double>(seq_len * k);
  }
  const auto mean_prob = route.probs.view({sequences, seq_len, experts}).mean(1);
  return aux_coef_ * experts * (fraction * mean_prob).sum(1).mean();
}

void MoeLayerImpl::update_balance_bias(bool apply) {
  if (!router->bias.defined() || !step_load_.defined()) return;
  torch::NoGradGuard no_grad;
  if (apply) router->bias.add_(torch::sign(step_load_.mean() - step_load_), bias_rate_);
  step_load_ = torch::Tensor();
}

MoeOutput MoeLayerImpl::forward(const torch::Tensor& x, c10::ScalarType compute_dtype,
                                int64_t seq_len) {
  const int64_t tokens = x.size(0);
  const int64_t num_experts = router->num_experts();
  const int64_t assignments = tokens * router->top_k();

  RouterOutput route;
  {
    PhaseScope phase(Phase::kRoute);
    route = router->forward(x);
  }
  const auto x_compute = x.to(compute_dtype);
  DispatchedTokens dispatched;
  {
    PhaseScope phase(Phase::kDispatch);
    dispatched = dispatcher_->dispatch(x_compute, route.kept_ids);
  }
  torch::Tensor expert_out;
  {
    PhaseScope phase(Phase::kExperts);
    expert_out = experts->forward(dispatched);
  }
  MoeOutput out;
  {
    PhaseScope phase(Phase::kCombine);
    out.y = dispatcher_->combine(expert_out, route.gates.to(compute_dtype));
  }
  if (shared) {
    PhaseScope phase(Phase::kExperts);
    auto shared_out = shared->forward(x_compute);
    // The gate's logit from the master-dtype input, as the router's.
    if (shared_gate.defined()) {
      shared_out = shared_out * torch::sigmoid(project(x, shared_gate)).to(compute_dtype);
    }
    out.y = out.y + shared_out;
  }

  PhaseScope phase(Phase::kRoute);
  // Statistics travel in one tensor so a global reduction is one collective:
  // [f_0 .. f_{E-1}, drop fraction, router entropy, ranks per token].
  torch::Tensor stats;
  RouteCounts counts;
  {
    torch::NoGradGuard no_grad;
    counts = route_counts(route.expert_ids, route.kept_ids, expert_rank_);
    const auto per_assignment = [&](const torch::Tensor& n) {
      return n.to(x.scalar_type()).reshape({-1}) / static_cast<double>(assignments);
    };
    const auto ranks =
        counts.ranks_reached.to(torch::kDouble).reshape({1}) / static_cast<double>(tokens);
    stats = torch::cat({per_assignment(counts.chosen_E), per_assignment(counts.dropped),
                        route.entropy.mean().reshape({1}), ranks.to(x.scalar_type())});
    if (reduce_mean_) stats = reduce_mean_(stats);
  }
  const auto load = stats.narrow(0, 0, num_experts);
  if (balance_ == Balance::kSwitch) {
    out.aux_loss = aux_coef_ * num_experts * (load * route.probs.mean(0)).sum();
  } else if (balance_ == Balance::kSequence) {
    out.aux_loss = sequence_balance_loss(route, seq_len);
  } else {
    out.aux_loss = torch::zeros({}, route.probs.options());
  }
  // A recomputation (activation checkpointing) saw this batch already.
  if (router->bias.defined() && is_training() && !recomputing()) {
    step_load_ = step_load_.defined() ? step_load_ + load : load.clone();
  }
  out.z_loss = z_coef_ * route.lse.pow(2).mean();
  out.stats.load = load.to(torch::kFloat32);
  out.stats.drop_fraction = stats[num_experts];
  out.stats.router_entropy = stats[num_experts + 1];
  out.stats.ranks_per_token = stats[num_experts + 2];
  out.stats.kept = counts.kept_E;
  out.stats.kept_ids = route.kept_ids;
  return out;
}

}  // namespace moelab
