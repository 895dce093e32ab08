#include "model/swiglu.h"

#include "model/compute.h"

namespace moelab {

SwiGLUImpl::SwiGLUImpl(int64_t d_model, int64_t d_hidden) {
  w1 = register_parameter("w1", torch::empty({d_hidden, d_model}));
  w2 = register_parameter("w2", torch::empty({d_model, d_hidden}));
  w3 = register_parameter("w3", torch::empty({d_hidden, d_model}));
}

torch::Tensor SwiGLUImpl::forward(const torch::Tensor& x) {
  // W1 and W3 share one matmul; the weight concat is cheap next to the activations.
  const auto gate_up = project(x, torch::cat({w1, w3}, 0));
  const int64_t hidden = w1.size(0);
  const auto gated =
      torch::silu(gate_up.narrow(-1, 0, hidden)) * gate_up.narrow(-1, hidden, hidden);
  return project(gated, w2);
}

}  // namespace moelab
