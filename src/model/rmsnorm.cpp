#include "model/rmsnorm.h"

namespace moelab {

RMSNormImpl::RMSNormImpl(int64_t dim, double eps) : eps_(eps) {
  weight = register_parameter("weight", torch::ones({dim}));
}

torch::Tensor RMSNormImpl::forward(const torch::Tensor& x, c10::ScalarType out_dtype) {
  const auto x_stat = x.scalar_type() == torch::kBFloat16 || x.scalar_type() == torch::kHalf
                          ? x.to(torch::kFloat32)
                          : x;
  const auto inv_rms = torch::rsqrt(x_stat.pow(2).mean(-1, /*keepdim=*/true) + eps_);
  return (x_stat * inv_rms * weight.to(x_stat.scalar_type())).to(out_dtype);
}

}  // namespace moelab
