#include "model/swiglu.h"

#include "kernels/swiglu.h"
#include "model/compute.h"

namespace moelab {

SwiGLUImpl::SwiGLUImpl(int64_t d_model, int64_t d_hidden) {
  w1 = register_parameter("w1", torch::empty({d_hidden, d_model}));
  w2 = register_parameter("w2", torch::empty({d_model, d_hidden}));
  w3 = register_parameter("w3", torch::empty({d_hidden, d_model}));
}

torch::Tensor SwiGLUImpl::forward(const torch::Tensor& x) {
  return swiglu_ffn(x, w1, w2, w3);
}

torch::Tensor swiglu_ffn(const torch::Tensor& x, const torch::Tensor& w1, const torch::Tensor& w2,
                         const torch::Tensor& w3) {
  // W1 and W3 share one matmul; the weight concat is cheap next to the activations.
  return project(swiglu(project(x, torch::cat({w1, w3}, 0))), w2);
}

}  // namespace moelab
