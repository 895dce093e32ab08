// MoE router: logits = x Wr^T (Linear(d, E), no bias) in fp32, scores, top-k
// experts per token by score.
//
// Scores (moe.score): "softmax" over the experts (Mixtral, Switch), or
// "sigmoid" of each logit on its own (DeepSeek-V3), whose affinities do not
// compete. `probs`, what load balancing, statistics and score-ordered dropping
// read, is the softmax, or the sigmoid scores normalised to sum to 1 per token
// (DeepSeek-V3's s').
//
// Gate weights of the k selected experts, times moe.route_scale:
//   "topk_softmax"   the k selected scores normalised to sum to 1: for softmax
//                    scores a softmax over the k selected logits (Mixtral);
//   "full_softmax"   the k selected scores as they are (Switch/GShard style):
//                    they sum to less than 1.
//
// Capacity (capacity_factor > 0): each expert takes at most
// ceil(capacity_factor * T * k / E) assignments. drop_policy "position" admits
// them in token order (token 0 slot 0, token 0 slot 1, token 1 slot 0, ...),
// "score" by descending router probability (ties in token order); those over
// capacity get expert id -1 and contribute nothing (the token keeps its residual).
//
// Selection bias (moe.balance = "aux_free", as in DeepSeek-V3): a per-expert
// bias, a buffer without gradient, is added to the logits (softmax) or to the
// sigmoid scores for the top-k choice only; gates come from the unbiased scores. MoeLayer moves it
// after each optimizer step towards balanced load.
//
// Group-limited routing (moe.n_groups > 1, DeepSeek-V2/V3): the E experts form
// n_groups groups of consecutive ids; each token first picks its topk_groups
// best groups, then its top k experts among those groups' experts only. A
// group's score is the sum of its two best affinities ("top2_sum", V3) or its
// best ("max", V2); the affinities are the ones the choice reads: the sigmoid
// scores plus the bias, or the softmax of the logits plus the bias.
#pragma once

#include <torch/torch.h>

#include "config/choices.h"

namespace moelab {

struct RouterOutput {
  torch::Tensor logits;      // [T, E] fp32 (or double)
  torch::Tensor probs;       // [T, E] a distribution over experts per token (above)
  torch::Tensor lse;         // [T] log-sum-exp of the logits (the z-loss's)
  torch::Tensor entropy;     // [T] entropy of probs, without gradient
  torch::Tensor expert_ids;  // [T, k] int64, the router's choice (before capacity)
  torch::Tensor kept_ids;    // [T, k] int64, expert_ids with dropped assignments set to -1
  torch::Tensor gates;       // [T, k] gate weights, differentiable
};

struct GroupLimit {
  int64_t n_groups = 1;
  int64_t topk_groups = 1;
  GroupScore score = GroupScore::kTop2Sum;
  bool limits() const { return topk_groups < n_groups; }
};

// [T, E] bool: true for the experts of each token's topk_groups best groups,
// the groups scored on affinity_TE [T, E] (above).
torch::Tensor group_limited_mask(const torch::Tensor& affinity_TE, const GroupLimit& groups);

class RouterImpl : public torch::nn::Module {
 public:
  RouterImpl(int64_t d_model, int64_t num_experts, int64_t top_k, Gate gate, double capacity_factor,
             DropPolicy drop_policy = DropPolicy::kPosition, bool selection_bias = false,
             Score score = Score::kSoftmax, double route_scale = 1.0, GroupLimit groups = {});
  // x: [T, d]; the router computes in x's dtype promoted to at least fp32.
  RouterOutput forward(const torch::Tensor& x);

  int64_t num_experts() const { return num_experts_; }
  int64_t top_k() const { return top_k_; }

  torch::Tensor weight;  // [E, d]
  torch::Tensor bias;    // [E] selection bias (a buffer), undefined without one

 private:
  // [T, k] the chosen experts, slot 0 the best, from the unbiased scores.
  torch::Tensor choose_experts(const torch::Tensor& logits, const torch::Tensor& scores) const;
  // probs, gates, lse and entropy from the sigmoid scores (softmax scores take
  // kernels/softmax_route.h's one pass).
  void score_sigmoid(RouterOutput& out, const torch::Tensor& scores) const;

  int64_t num_experts_, top_k_;
  Gate gate_;
  double capacity_factor_;
  DropPolicy drop_policy_;
  bool sigmoid_;
  double route_scale_;
  GroupLimit groups_;
};
TORCH_MODULE(Router);

// Sets to -1 the assignments beyond each expert's capacity, admitted in token
// order, or, given `priority` (same shape), highest priority first.
torch::Tensor apply_capacity(const torch::Tensor& expert_ids, int64_t num_experts, int64_t capacity,
                             const torch::Tensor& priority = {});

}  // namespace moelab
