// Gradient clipping by the global norm, split into pieces so the norm can span
// ranks: each rank sums the squares of the gradients it owns, a reduction adds
// those sums over the ranks (ParallelPlan::grad_sq_norm), and every rank scales
// by the same factor.
#pragma once

#include <torch/torch.h>

#include <vector>

namespace moelab {

// Sum of squared entries over gradient tensors (undefined ones count as zero),
// accumulated in fp64 whatever their dtype: a 0-dim tensor on `device` (the
// gradients' device), not read back to the host.
torch::Tensor grad_sq_norm_tensor(const std::vector<torch::Tensor>& grads,
                                  const torch::Device& device);

// Clipping once the global norm is known: when max_norm > 0 and `norm` exceeds
// it, the gradients are scaled in place by max_norm / (norm + 1e-6), as
// torch.nn.utils.clip_grad_norm_ does. A non-finite norm leaves them alone: the
// caller should skip that step.
void clip_to_norm(const std::vector<torch::Tensor>& grads, double norm, double max_norm);

}  // namespace moelab
