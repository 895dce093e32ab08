#include "parallel/grad_clip.h"

#include <cmath>

namespace moelab {
namespace {

std::vector<torch::Tensor> grads_of(const std::vector<torch::Tensor>& params) {
  std::vector<torch::Tensor> grads;
  for (const auto& param : params) grads.push_back(param.grad());
  return grads;
}

}  // namespace

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

torch::Tensor local_grad_sq_norm_tensor(const std::vector<torch::Tensor>& params,
                                        const torch::Device& device) {
  return grad_sq_norm_tensor(grads_of(params), device);
}

double local_grad_sq_norm(const std::vector<torch::Tensor>& params) {
  const torch::Device device = params.empty() ? torch::Device(torch::kCPU) : params[0].device();
  return local_grad_sq_norm_tensor(params, device).item<double>();
}

void clip_grads_to_norm(const std::vector<torch::Tensor>& params, double norm, double max_norm) {
  clip_to_norm(grads_of(params), norm, max_norm);
}

double clip_grad_norm(const std::vector<torch::Tensor>& params, double max_norm,
                      const std::function<double(double)>& reduce_sum) {
  const double norm = std::sqrt(reduce_sum(local_grad_sq_norm(params)));
  clip_grads_to_norm(params, norm, max_norm);
  return norm;
}

}  // namespace moelab
