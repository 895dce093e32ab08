#include "model/rmsnorm.h"

#include "kernels/rms_norm.h"

namespace moelab {

RMSNormImpl::RMSNormImpl(int64_t dim, double eps) : eps_(eps) {
  weight = register_parameter("weight", torch::ones({dim}));
}

torch::Tensor RMSNormImpl::forward(const torch::Tensor& x, c10::ScalarType out_dtype) {
  return rms_norm(x, weight, eps_, out_dtype);
}

}  // namespace moelab
