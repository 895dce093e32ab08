// Checkpoints name every expert's matrices (and their AdamW state) by global
// expert id, one tensor each, whatever layout the model keeps them in; the
// model stacks the experts of a width into one parameter per projection
// (model/experts.h). These convert a rank's parts of the stacks into parts of
// the per-expert tensors at the checkpoint's edge, so a stacked model writes
// exactly the tensors a per-expert one wrote and loads every checkpoint that
// one could.
#pragma once

#include <string>

#include "checkpoint/tensor_parts.h"
#include "model/experts.h"

namespace moelab {

// Each part of a stacked parameter or of its optimizer state
// ("optim/<name>/exp_avg", "exp_avg_sq", "step") replaced by the parts of the
// rows it covers, under the rows' names; other parts stay as they are. The
// stack's step, one count for all its rows, becomes every row's: for writing,
// the same data; with `separate_steps` (for reading) a scalar of its own per
// row, which join_stacked_steps then checks and joins.
TensorParts split_stacked_parts(const TensorParts& parts, const StackedParams& stacked,
                                bool separate_steps = false);

// After reading `row_parts` (split_stacked_parts(stack_parts, stacked, true)):
// each stack's step from its rows', which must agree (InputError naming
// `source` and the row otherwise: experts stacked into one parameter share one
// step count).
void join_stacked_steps(const TensorParts& stack_parts, const TensorParts& row_parts,
                        const StackedParams& stacked, const std::string& source);

}  // namespace moelab
