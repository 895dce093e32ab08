#include "model/router.h"

#include <cmath>
#include <limits>

#include "kernels/softmax_route.h"
#include "kernels/top_k.h"
#include "model/compute.h"
#include "util/error.h"

namespace moelab {
namespace {

torch::Tensor normalised(const torch::Tensor& weights) {
  return weights / weights.sum(-1, /*keepdim=*/true);
}

}  // namespace

RouterImpl::RouterImpl(int64_t d_model, int64_t num_experts, int64_t top_k, Gate gate,
                       double capacity_factor, DropPolicy drop_policy, bool selection_bias,
                       Score score, double route_scale, GroupLimit groups)
    : num_experts_(num_experts),
      top_k_(top_k),
      gate_(gate),
      capacity_factor_(capacity_factor),
      drop_policy_(drop_policy),
      sigmoid_(score == Score::kSigmoid),
      route_scale_(route_scale),
      groups_(groups) {
  if (top_k_ < 1 || top_k_ > num_experts_) {
    throw InputError("moe.top_k: expected 1 <= top_k <= num_experts (" +
                     std::to_string(num_experts_) + "), got " + std::to_string(top_k_));
  }
  weight = register_parameter("weight", torch::empty({num_experts, d_model}));
  if (selection_bias) bias = register_buffer("bias", torch::zeros({num_experts}));
}

RouterOutput RouterImpl::forward(const torch::Tensor& x) {
  const auto x_stat = x.scalar_type() == torch::kBFloat16 ? x.to(torch::kFloat32) : x;
  RouterOutput out;
  out.logits = project(x_stat, weight);
  const auto scores = sigmoid_ ? torch::sigmoid(out.logits) : torch::Tensor();
  out.expert_ids = choose_experts(out.logits, scores);
  if (sigmoid_) {
    score_sigmoid(out, scores);
  } else {
    auto route = softmax_route(out.logits, out.expert_ids, gate_ == Gate::kTopkSoftmax);
    out.probs = route.probs_TE;
    out.gates = route.gates_TK;
    out.lse = route.lse_T;
    out.entropy = route.entropy_T;
  }
  if (route_scale_ != 1.0) out.gates = out.gates * route_scale_;
  if (capacity_factor_ > 0) {
    const int64_t assignments = x.size(0) * top_k_;
    const auto capacity = static_cast<int64_t>(
        std::ceil(capacity_factor_ * static_cast<double>(assignments) / num_experts_));
    const auto priority = drop_policy_ == DropPolicy::kScore
                              ? out.probs.detach().gather(-1, out.expert_ids)
                              : torch::Tensor();
    out.kept_ids = apply_capacity(out.expert_ids, num_experts_, capacity, priority);
  } else {
    out.kept_ids = out.expert_ids;
  }
  return out;
}

void RouterImpl::score_sigmoid(RouterOutput& out, const torch::Tensor& scores) const {
  const auto total = scores.sum(-1, /*keepdim=*/true);
  out.probs = scores / total;
  out.lse = torch::logsumexp(out.logits, -1);
  const auto chosen = scores.gather(-1, out.expert_ids);
  out.gates = gate_ == Gate::kTopkSoftmax ? normalised(chosen) : chosen;
  torch::NoGradGuard no_grad;
  const auto log_probs = torch::log_sigmoid(out.logits) - total.log();
  out.entropy = -(out.probs * log_probs).sum(-1);
}

torch::Tensor RouterImpl::choose_experts(const torch::Tensor& logits,
                                         const torch::Tensor& scores) const {
  // The choice only: gates take their gradient through a gather of the
  // scores. A selection bias shifts the logits (softmax) or the sigmoid scores
  // (DeepSeek-V3); unbiased, both order experts as the logits do.
  auto choice = sigmoid_ ? scores.detach() : logits.detach();
  if (bias.defined()) choice = choice + bias.to(choice.scalar_type());
  if (groups_.limits()) {
    const auto affinity = sigmoid_ ? choice : torch::softmax(choice, -1);
    choice = choice.masked_fill(group_limited_mask(affinity, groups_).logical_not(),
                                -std::numeric_limits<double>::infinity());
  }
  return top_k_indices(choice, top_k_);
}

torch::Tensor group_limited_mask(const torch::Tensor& affinity_TE, const GroupLimit& groups) {
  const int64_t tokens = affinity_TE.size(0);
  const auto affinity_TGe = affinity_TE.reshape({tokens, groups.n_groups, -1});
  const auto score_TG = groups.score == GroupScore::kMax
                            ? std::get<0>(affinity_TGe.max(-1))
                            : std::get<0>(affinity_TGe.topk(2, -1)).sum(-1);
  const auto best_TM = std::get<1>(score_TG.topk(groups.topk_groups, -1));  // M = topk_groups
  const auto picked_TG = torch::zeros_like(score_TG, score_TG.options().dtype(torch::kBool))
                             .scatter_(1, best_TM, true);
  return picked_TG.unsqueeze(-1).expand(affinity_TGe.sizes()).reshape({tokens, -1});
}

torch::Tensor apply_capacity(const torch::Tensor& expert_ids, int64_t num_experts, int64_t capacity,
                             const torch::Tensor& priority) {
  auto flat = expert_ids.reshape(-1);  // token-major: (t0,s0), (t0,s1), (t1,s0), ...
  torch::Tensor order;                 // arrival order, when it is not token order
  if (priority.defined()) {
    order = std::get<1>(priority.reshape(-1).sort(/*stable=*/true, /*dim=*/0, /*descending=*/true));
    flat = flat.index_select(0, order);
  }
  const auto one_hot = torch::one_hot(flat, num_experts);
  // 0-based arrival position of each assignment at its expert.
  const auto position = (one_hot.cumsum(0) - 1).gather(1, flat.unsqueeze(1)).squeeze(1);
  auto kept = torch::where(position < capacity, flat, torch::full_like(flat, -1));
  if (order.defined()) kept = torch::empty_like(kept).index_copy_(0, order, kept);
  return kept.view(expert_ids.sizes());
}

}  // namespace moelab
