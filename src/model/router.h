// MoE router: logits = x Wr^T (Linear(d, E), no bias), probabilities by an
// fp32 softmax, top-k experts per token.
//
// Gate weights of the k selected experts:
//   "topk_softmax"   softmax over the k selected logits (Mixtral);
//   "full_softmax"   the full-softmax probabilities of the k selected experts as
//                    they are (Switch/GShard style): they sum to less than 1.
// Re-normalising "full_softmax" over the k would give "topk_softmax" exactly
// (p_i / sum_sel p_j = exp(l_i) / sum_sel exp(l_j)), so that is not an option.
//
// Capacity (capacity_factor > 0): each expert takes at most
// ceil(capacity_factor * T * k / E) assignments. drop_policy "position" admits
// them in token order (token 0 slot 0, token 0 slot 1, token 1 slot 0, ...),
// "score" by descending router probability (ties in token order); those over
// capacity get expert id -1 and contribute nothing (the token keeps its residual).
//
// Selection bias (moe.balance = "aux_free", as in DeepSeek-V3): a per-expert
// bias, a buffer without gradient, is added to the logits for the top-k choice
// only; gates come from the unbiased logits. MoeLayer moves it after each
// optimizer step towards balanced load.
#pragma once

#include <torch/torch.h>

#include <string>

namespace moelab {

struct RouterOutput {
  torch::Tensor logits;      // [T, E] fp32 (or double)
  torch::Tensor probs;       // [T, E] full softmax
  torch::Tensor expert_ids;  // [T, k] int64, the router's choice (before capacity)
  torch::Tensor kept_ids;    // [T, k] int64, expert_ids with dropped assignments set to -1
  torch::Tensor gates;       // [T, k] gate weights, differentiable
};

class RouterImpl : public torch::nn::Module {
 public:
  RouterImpl(int64_t d_model, int64_t num_experts, int64_t top_k, std::string gate,
             double capacity_factor, std::string drop_policy = "position",
             bool selection_bias = false);
  // x: [T, d]; the router computes in x's dtype promoted to at least fp32.
  RouterOutput forward(const torch::Tensor& x);

  int64_t num_experts() const { return num_experts_; }
  int64_t top_k() const { return top_k_; }

  torch::Tensor weight;  // [E, d]
  torch::Tensor bias;    // [E] selection bias (a buffer), undefined without one

 private:
  int64_t num_experts_, top_k_;
  std::string gate_;
  double capacity_factor_;
  std::string drop_policy_;
};
TORCH_MODULE(Router);

// Sets to -1 the assignments beyond each expert's capacity, admitted in token
// order, or, given `priority` (same shape), highest priority first.
torch::Tensor apply_capacity(const torch::Tensor& expert_ids, int64_t num_experts, int64_t capacity,
                             const torch::Tensor& priority = {});

}  // namespace moelab
