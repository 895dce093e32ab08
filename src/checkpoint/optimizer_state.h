// AdamW's state as named tensors, so checkpoints store it by parameter name
// (rank-count agnostic) whatever optimizer object steps it.
#pragma once

#include <torch/torch.h>

#include <map>
#include <string>

#include "model/named_params.h"

namespace moelab {

// LibTorch keys per-parameter optimizer state by the address of the tensor's impl.
void* optimizer_state_key(const torch::Tensor& param);

// "optim/<name>/<field>": the prefix keeps these apart from the parameter named
// <name> itself, which an HDF5 file could not hold beside a group of that name.
std::string optimizer_state_name(const std::string& param_name, const std::string& field);

// "optim/<name>/exp_avg", "optim/<name>/exp_avg_sq" and "optim/<name>/step" (int64
// scalar) for every parameter; a parameter the optimizer has not stepped yet
// reports zeros and step 0, which is exactly the state AdamW would create for it.
// The moments share storage with the live state.
std::map<std::string, torch::Tensor> optimizer_state_tensors(const torch::optim::AdamW& optimizer,
                                                             const NamedParams& named_params);

// Restores what optimizer_state_tensors() produced. A parameter whose entries are
// missing or have the wrong shape is an InputError naming the parameter.
void load_optimizer_state(torch::optim::AdamW& optimizer, const NamedParams& named_params,
                          const std::map<std::string, torch::Tensor>& state);

}  // namespace moelab
