// Mixture-of-experts FFN: route -> dispatch -> experts -> combine -> weight by
// gates, sum over the k slots; plus one always-on SwiGLU of width
// moe.shared_width() (the shared experts), with moe.shared_expert_gate
// weighted per token by sigmoid(x . w_g) (Qwen2-MoE).
//
// Auxiliary losses (per layer; the model sums them over MoE layers):
//   load balancing, by moe.balance:
//   "switch"        aux = alpha * E * sum_i f_i * P_i
//     f_i = (assignments routed to expert i) / (T * k), counting the router's
//           top-k choices BEFORE capacity drops, no gradient;
//     P_i = mean over the T local tokens of the router's softmax probability of
//           expert i (carries the gradient).
//     With a reduce_mean callback f_i is averaged over data-parallel ranks
//     ("global" statistics; equals the global fraction when ranks hold equal
//     token counts); P_i stays the local mean, so the gradient of the mean loss
//     over ranks matches the single-rank gradient. Without it f_i is local.
//   "sequence"      the same computed within each sequence (f and P over its
//                   S tokens, no reduction across ranks) and averaged over the
//                   sequences: it balances every sequence, not only the batch.
//   "aux_free"      no loss: the router's selection bias b (router.h) moves
//                   after each optimizer step by b_i += rate * sign(mean_j c_j
//                   - c_i), c the step's load summed over its micro-batches
//                   (global statistics, so every rank moves b alike).
//   "none"          no loss and no bias.
//   router z-loss   z = beta * mean_t (logsumexp_i logits_ti)^2, local tokens.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <memory>

#include "config/config.h"
#include "model/experts.h"
#include "model/router.h"
#include "model/swiglu.h"
#include "model/token_dispatcher.h"

namespace moelab {

using ReduceMean = std::function<torch::Tensor(const torch::Tensor&)>;

struct MoeLayerStats {
  torch::Tensor load;  // [E] fraction of assignments per global expert, detached
  // 0-dim tensors on the layer's device, so a step reads none of them back
  // unless it logs them.
  torch::Tensor drop_fraction;   // dropped / (T * k)
  torch::Tensor router_entropy;  // mean over tokens of -sum_i p_i log p_i (nats)
  // Mean over tokens of the distinct expert-parallel ranks that a token's kept
  // assignments go to (1 on one rank; DeepSeek's device limit bounds it).
  torch::Tensor ranks_per_token;
  // [E] int64: assignments each global expert kept after capacity, counted over
  // this rank's tokens alone (what routing analysis sums over ranks).
  torch::Tensor kept;
  // [T, k] int64: each of this rank's tokens' kept experts, -1 where capacity
  // dropped the assignment (the router's own tensor; token-level routing dumps).
  torch::Tensor kept_ids;
};

struct MoeOutput {
  torch::Tensor y;         // [T, d] in the compute dtype
  torch::Tensor aux_loss;  // scalar, already times alpha
  torch::Tensor z_loss;    // scalar, already times beta
  MoeLayerStats stats;
};

class MoeLayerImpl : public torch::nn::Module {
 public:
  // d: model.d_model, the width of the tokens routed.
  MoeLayerImpl(int64_t d, const MoeConfig& moe, std::shared_ptr<TokenDispatcher> dispatcher,
               ReduceMean reduce_mean);
  // x: [T, d] normalised hidden states in the master dtype (the router runs on
  // them), T/seq_len sequences of seq_len tokens each (0: one sequence);
  // experts run in compute_dtype.
  MoeOutput forward(const torch::Tensor& x, c10::ScalarType compute_dtype, int64_t seq_len = 0);
  // "aux_free": moves the selection bias by the load seen since the last call
  // (training forwards only; not when apply is false), then forgets that load.
  // No-op otherwise.
  void update_balance_bias(bool apply = true);

  Router router{nullptr};
  Experts experts{nullptr};
  SwiGLU shared{nullptr};     // all shared experts as one SwiGLU of width moe.shared_width()
  torch::Tensor shared_gate;  // w_g [1, d] with moe.shared_expert_gate, else undefined

 private:
  torch::Tensor sequence_balance_loss(const RouterOutput& route, int64_t seq_len) const;

  std::shared_ptr<TokenDispatcher> dispatcher_;
  ReduceMean reduce_mean_;
  Balance balance_;
  double aux_coef_, z_coef_, bias_rate_;
  torch::Tensor step_load_;    // aux_free: load summed over this step's micro-batches
  torch::Tensor expert_rank_;  // [E] int64: the EP rank holding each global expert
};
TORCH_MODULE(MoeLayer);

}  // namespace moelab
