// Evaluates a saved model: the model is rebuilt from the config stored in the
// checkpoint at the (world, ep) layout asked for (experts split over the ranks
// as in training), its weights loaded by name, and the split's loss computed
// exactly as during training; with a prepared task folder, its downstream
// tasks scored as in the loop (task_suite.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "train/task_result.h"

namespace moelab {

struct EvalCheckpointOptions {
  std::string checkpoint;
  std::string data_dir;  // "" = the dir of the run's first validation set
  std::string split;     // "" = the split of the run's first validation set
  int64_t max_windows = 0;
  int64_t batch_seqs = 16;
  int64_t ep = 1;
  std::string tasks_dir;           // "" = the loss alone
  std::vector<std::string> tasks;  // [] = every task of tasks_dir
  int64_t limit = 0;               // each task's first N items (0 = all)
};

struct EvalCheckpointResult {
  int64_t step = 0;
  std::string split;
  double loss = 0;
  int64_t tokens = 0;
  double loss_seconds = 0;
  std::vector<TaskResult> tasks;
};

EvalCheckpointResult evaluate_checkpoint(const EvalCheckpointOptions& opts);

}  // namespace moelab
