// Gradient clipping by the global norm, split into pieces so the norm can span
// ranks: each rank sums the squares of the gradients it owns, a caller-supplied
// reduction adds those sums over the ranks, and every rank scales by the same factor.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <vector>

namespace moelab {

// Sum of squared entries over gradient tensors themselves (undefined ones
// count as zero), in fp64: a 0-dim tensor on `device`. The parameter forms
// below apply it to each parameter's .grad(); the sharded optimizer applies it
// to its slices of them.
torch::Tensor grad_sq_norm_tensor(const std::vector<torch::Tensor>& grads,
                                  const torch::Device& device);

// clip_grads_to_norm's rule over gradient tensors themselves, scaled in place.
void clip_to_norm(const std::vector<torch::Tensor>& grads, double norm, double max_norm);

// Sum of squared gradient entries over `params` (undefined gradients count as
// zero), accumulated in fp64 whatever the gradient dtype: a 0-dim tensor on
// `device` (the gradients' device), not read back to the host.
torch::Tensor local_grad_sq_norm_tensor(const std::vector<torch::Tensor>& params,
                                        const torch::Device& device);

// The same, read back (one host synchronisation on a GPU).
double local_grad_sq_norm(const std::vector<torch::Tensor>& params);

// Clipping once the global norm is known: when max_norm > 0 and `norm` exceeds
// it, gradients are scaled by max_norm / (norm + 1e-6), as
// torch.nn.utils.clip_grad_norm_ does. A non-finite norm leaves them alone: the
// caller should skip that step.
void clip_grads_to_norm(const std::vector<torch::Tensor>& params, double norm, double max_norm);

// Returns the global gradient norm before clipping: sqrt(reduce_sum(local sum of
// squares)), then clip_grads_to_norm.
// reduce_sum is the identity on one rank; with data parallelism it must count each
// distinct gradient once (replicated gradients on one rank of their group only).
double clip_grad_norm(const std::vector<torch::Tensor>& params, double max_norm,
                      const std::function<double(double)>& reduce_sum);

}  // namespace moelab
