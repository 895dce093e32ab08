// The router's softmax scores of one batch in one pass per token: each row's
// distribution over the experts, the gates of the experts chosen for it, its
// log-sum-exp (the z-loss's) and its entropy (a statistic), instead of a
// softmax, a log-softmax, a log-sum-exp and a gather (and a softmax over the
// gathered logits), each reading the whole [T, E] logits and each with its own
// backward pass.
#pragma once

#include <ATen/core/Tensor.h>

namespace moelab {

struct SoftmaxRoute {
  at::Tensor probs_TE;   // softmax of each token's logits
  at::Tensor gates_TK;   // the chosen experts' gates
  at::Tensor lse_T;      // log-sum-exp of each token's logits
  at::Tensor entropy_T;  // entropy of probs_TE's rows, without gradient
};

// logits_TE fp32 or double, chosen_TK int64 expert ids (distinct per row).
// Gates: with gates_over_chosen a softmax over the chosen logits (Mixtral's
// top-k softmax), else the chosen probabilities as they are. probs, gates and
// lse carry gradients to logits_TE. One CPU loop for fp32 and double;
// elsewhere the composition below.
SoftmaxRoute softmax_route(const at::Tensor& logits_TE, const at::Tensor& chosen_TK,
                           bool gates_over_chosen);

// The same from LibTorch ops: softmax, log-sum-exp, gather, and the entropy
// from log_softmax.
SoftmaxRoute softmax_route_reference(const at::Tensor& logits_TE, const at::Tensor& chosen_TK,
                                     bool gates_over_chosen);

}  // namespace moelab
