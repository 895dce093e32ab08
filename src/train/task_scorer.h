// Downstream task scoring: every choice's continuation log-likelihood from
// the model's forward passes, batched and split over the data-parallel ranks
// as the validation loss is (evaluator.h): each rank scores its share of the
// requests, every rank runs the same number of forward passes (MoE layers
// exchange tokens collectively at any (world, ep) layout), and one all-reduce
// gives every rank all the scores. Contexts longer than the model's seq_len
// are cut from the left, as OLMo and lm-evaluation-harness do.
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

#include "comm/communicator.h"
#include "model/transformer.h"
#include "tasks/task_file.h"
#include "tasks/task_metrics.h"
#include "train/task_result.h"

namespace moelab {

struct TaskBatching {
  int64_t seq_len = 0;     // the model's: longer inputs lose their context's start
  int64_t batch_seqs = 0;  // a pass holds at most batch_seqs * seq_len tokens
  int64_t pad_id = 0;      // right padding (causal attention never reads it)
};

// Collective over `dp` (null: this process alone). InputError naming `task`
// when a continuation alone is longer than seq_len.
ScoredChoices score_choices(Transformer& model, const std::vector<TaskItem>& items,
                            const TaskBatching& batching, Communicator* dp,
                            const torch::Device& device, const std::string& task);

}  // namespace moelab
