// A model's tensors by name, in the model's order: what the optimizer, the
// parallel plan and checkpoints pass between them.
#pragma once

#include <torch/torch.h>

#include <string>
#include <utility>
#include <vector>

namespace moelab {

using NamedParams = std::vector<std::pair<std::string, torch::Tensor>>;

}  // namespace moelab
