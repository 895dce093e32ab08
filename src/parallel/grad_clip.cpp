#include "parallel/grad_clip.h"

#include <cmath>

namespace moelab {

torch::Tensor grad_sq_norm_tensor(const std::vector<torch::Tensor>& grads,
                                  const torch::Device& device) {
  torch::Tensor total = torch::zeros({}, torch::TensorOptions(torch::kDouble).device(device));
  for (const auto& grad : grads) {
    if (grad.defined()) total.add_(grad.to(torch::kDouble).square().sum());
  }
  return total;
}

void clip_to_norm(const std::vector<torch::Tensor>& grads, double norm, double max_norm) {
  if (max_norm <= 0.0 || !std::isfinite(norm)) return;
  const double factor = max_norm / (norm + 1e-6);
  if (factor >= 1.0) return;
  torch::NoGradGuard no_grad;
  for (torch::Tensor grad : grads) {
    if (grad.defined()) grad.mul_(factor);
  }
}

}  // namespace moelab
