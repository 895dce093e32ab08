#include "model/compute.h"

#include <ATen/CPUGeneratorImpl.h>
#include <xxhash.h>

namespace moelab {

torch::Tensor project(const torch::Tensor& x, const torch::Tensor& w) {
  return torch::matmul(x, w.to(x.scalar_type()).t());
}

torch::Tensor project(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b) {
  return torch::linear(x, w.to(x.scalar_type()), b.to(x.scalar_type()));
}

void init_normal_keyed(torch::Tensor& w, int64_t seed, const std::string& name, double std) {
  const uint64_t key = XXH64(name.data(), name.size(), static_cast<uint64_t>(seed));
  auto gen = at::make_generator<at::CPUGeneratorImpl>(key);
  // Drawn in fp32 on the CPU whatever the parameter's dtype or device, so fp32
  // and double models (and CPU and GPU ones) start from the same numbers.
  auto values = torch::empty(w.sizes(), torch::kFloat32).normal_(0.0, std, gen);
  torch::NoGradGuard no_grad;
  w.copy_(values);
}

}  // namespace moelab
