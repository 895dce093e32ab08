// RMSNorm: y = x / sqrt(mean(x^2) + eps) * weight, statistics in at least fp32.
#pragma once

#include <torch/torch.h>

namespace moelab {

class RMSNormImpl : public torch::nn::Module {
 public:
  RMSNormImpl(int64_t dim, double eps);
  // Normalises in x's dtype when it is fp32/double (bf16 input is promoted to
  // fp32) and returns the result in out_dtype.
  torch::Tensor forward(const torch::Tensor& x, c10::ScalarType out_dtype);
  torch::Tensor forward(const torch::Tensor& x) { return forward(x, x.scalar_type()); }

  torch::Tensor weight;

 private:
  double eps_;
};
TORCH_MODULE(RMSNorm);

}  // namespace moelab
