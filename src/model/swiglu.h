// SwiGLU feed-forward: W2(silu(W1 x) * W3 x), no biases. Used for the dense
// FFN, each routed expert and the shared experts.
#pragma once

#include <torch/torch.h>

namespace moelab {

class SwiGLUImpl : public torch::nn::Module {
 public:
  SwiGLUImpl(int64_t d_model, int64_t d_hidden);
  // x: [..., d] in the compute dtype; returns the same shape and dtype.
  torch::Tensor forward(const torch::Tensor& x);

  torch::Tensor w1, w3;  // [d_hidden, d]
  torch::Tensor w2;      // [d, d_hidden]
};
TORCH_MODULE(SwiGLU);

// W2(silu(W1 x) * W3 x) for the given matrices (a SwiGLU's, or one routed
// expert's rows of the stacks), x in the compute dtype.
torch::Tensor swiglu_ffn(const torch::Tensor& x, const torch::Tensor& w1, const torch::Tensor& w2,
                         const torch::Tensor& w3);

}  // namespace moelab
