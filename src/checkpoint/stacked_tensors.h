// Checkpoints name every expert's matrices (and their AdamW state) by global
// expert id, one tensor each, whatever layout the model keeps them in; the
// model stacks the experts of a width into one parameter per projection
// (model/experts.h). These convert between the two at the checkpoint's edge,
// so a stacked model writes exactly the tensors a per-expert one wrote and
// loads every checkpoint that one could.
#pragma once

#include <torch/torch.h>

#include <map>
#include <string>

#include "model/experts.h"

namespace moelab {

using NamedTensors = std::map<std::string, torch::Tensor>;

// Each stacked parameter's tensor and optimizer state ("optim/<name>/exp_avg",
// "exp_avg_sq", "step") replaced by one tensor per row under the row's name;
// the step, one count for the whole stack, is repeated for every row.
NamedTensors split_stacked(NamedTensors tensors, const StackedParams& stacked);

// The inverse, for a checkpoint read from `source`: rows stacked back under the
// parameter's name. Rows of a parameter's optimizer state join only when the
// checkpoint holds that state. InputError naming `source` and the row when a
// row is missing, rows differ in shape, or the rows' steps differ.
NamedTensors join_stacked(NamedTensors tensors, const StackedParams& stacked,
                          const std::string& source);

}  // namespace moelab
