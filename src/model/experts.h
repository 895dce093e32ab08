// The routed experts this rank holds: SwiGLU FFNs of width d_expert, each
// registered under its GLOBAL expert id ("<gid>.w1", ...), so parameter names
// (and checkpoints) do not depend on how experts are spread over ranks.
#pragma once

#include <torch/torch.h>

#include <vector>

#include "model/swiglu.h"
#include "model/token_dispatcher.h"

namespace moelab {

class ExpertsImpl : public torch::nn::Module {
 public:
  ExpertsImpl(int64_t d_model, int64_t d_expert, const std::vector<int64_t>& global_ids);
  // Rows grouped by local expert (as a dispatcher returns them); each group goes
  // through its expert, outputs stay in the same row order. Experts that got
  // no rows still run on an empty slice so every expert has a (zero) gradient.
  torch::Tensor forward(const DispatchedTokens& dispatched);

  const std::vector<int64_t>& global_ids() const { return global_ids_; }
  SwiGLU expert(size_t local_index) const { return experts_[local_index]; }

 private:
  std::vector<int64_t> global_ids_;
  std::vector<SwiGLU> experts_;
};
TORCH_MODULE(Experts);

}  // namespace moelab
