// AdamW with decoupled weight decay on weight matrices only, and its state as
// named tensors so checkpoints store it by parameter name (rank-count agnostic).
#pragma once

#include <torch/torch.h>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "config/config.h"

namespace moelab {

using NamedParams = std::vector<std::pair<std::string, torch::Tensor>>;

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

// "optim/<name>/<field>": the prefix keeps these apart from the parameter named
// <name> itself, which an HDF5 file could not hold beside a group of that name.
std::string optimizer_state_name(const std::string& param_name, const std::string& field);

// "optim/<name>/exp_avg", "optim/<name>/exp_avg_sq" and "optim/<name>/step" (int64
// scalar) for every
// parameter; a parameter the optimizer has not stepped yet reports zeros and step 0,
// which is exactly the state AdamW would create for it. The moments share storage
// with the live state. The "optim/" prefix lets them share a tensor file with the
// parameters (a bare "<name>/..." would make <name> an HDF5 group).
std::map<std::string, torch::Tensor> optimizer_state_tensors(const torch::optim::AdamW& optimizer,
                                                             const NamedParams& named_params);

// Restores what optimizer_state_tensors() produced. A parameter whose entries are
// missing or have the wrong shape is an InputError naming the parameter.
void load_optimizer_state(torch::optim::AdamW& optimizer, const NamedParams& named_params,
                          const std::map<std::string, torch::Tensor>& state);

}  // namespace moelab
