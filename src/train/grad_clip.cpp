#include "train/grad_clip.h"

#include <cmath>

namespace moelab {

double local_grad_sq_norm(const std::vector<torch::Tensor>& params) {
  // One fp64 accumulator tensor and a single .item(), so a GPU syncs once.
  torch::Tensor total;
  for (const auto& param : params) {
    const torch::Tensor& grad = param.grad();
    if (!grad.defined()) continue;
    torch::Tensor sq = grad.to(torch::kDouble).square().sum();
    total = total.defined() ? total + sq : sq;
  }
  return total.defined() ? total.item<double>() : 0.0;
}

void scale_grads(const std::vector<torch::Tensor>& params, double factor) {
  torch::NoGradGuard no_grad;
  for (const auto& param : params) {
    torch::Tensor grad = param.grad();
    if (grad.defined()) grad.mul_(factor);
  }
}

double clip_grad_norm(const std::vector<torch::Tensor>& params, double max_norm,
                      const std::function<double(double)>& reduce_sum) {
  const double norm = std::sqrt(reduce_sum(local_grad_sq_norm(params)));
  if (max_norm > 0.0 && std::isfinite(norm)) {
    const double factor = max_norm / (norm + 1e-6);
    if (factor < 1.0) scale_grads(params, factor);
  }
  return norm;
}

}  // namespace moelab
