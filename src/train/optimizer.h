// AdamW with decoupled weight decay on weight matrices only (its state as named
// tensors: checkpoint/optimizer_state.h).
#pragma once

#include <torch/torch.h>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "config/config.h"
#include "model/named_params.h"

namespace moelab {

// LibTorch's AdamW, stepped by ATen's fused kernel (_fused_adamw_): one pass
// over each parameter's memory instead of about ten element-wise ops. Same
// update, state and checkpoint layout as torch::optim::AdamW (the step count
// stays an integer in AdamWParamState); equal to it within float rounding.
class FusedAdamW : public torch::optim::AdamW {
 public:
  using torch::optim::AdamW::AdamW;
  torch::Tensor step(LossClosure closure = nullptr) override;
};

// A FusedAdamW with two parameter groups: tensors with dim >= 2 (matrices,
// embeddings, experts, the router and the shared-expert gate w_g [1, d]) get
// cfg.weight_decay; vectors (norm gains, q/k/v biases) get none, as decaying
// them toward zero only fights the normalisation or shifts the activations.
std::unique_ptr<torch::optim::AdamW> make_adamw(const NamedParams& named_params,
                                                const OptimConfig& cfg);
// The same with the two groups given: tensors that are slices of parameters
// (optimizer_shards.h) decay as their parameters do, not by their own shape.
std::unique_ptr<torch::optim::AdamW> make_adamw(std::vector<torch::Tensor> decayed,
                                                std::vector<torch::Tensor> not_decayed,
                                                const OptimConfig& cfg);

}  // namespace moelab
