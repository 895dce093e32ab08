// The downstream tasks of a run ([[eval.tasks]]), the piece the trainer calls
// at each validation: every task due at the step is scored on every rank's
// share (task_suite.h), and the results come back as val.csv cells,
// TensorBoard scalars and a summary with the time they took, for the log.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "comm/communicator.h"
#include "config/config.h"
#include "data/dataset_info.h"
#include "model/transformer.h"
#include "train/task_suite.h"

namespace moelab {

struct TaskEvalRow {
  std::vector<std::optional<double>> cells;             // one per column, unset where not due
  std::vector<std::pair<std::string, double>> scalars;  // TensorBoard tag, value
  double seconds = 0;                                   // scoring every due task
  std::string summary;  // "blimp acc 0.61 ... (3.2 s)"; empty when none was due
};

class TaskEvals {
 public:
  // Reads the config's tasks; `data` is the training data's first split, whose
  // tokenizer the tasks must have been prepared with.
  TaskEvals(const Config& cfg, const DatasetInfo& data, const std::string& data_dir);

  // val.csv's task columns (task/<name>/<metric>), fixed for the run.
  const std::vector<std::string>& columns() const { return columns_; }

  // Collective: scores the tasks due at `step` (their interval, the first
  // validation and the last step).
  TaskEvalRow run(int64_t step, Transformer& model, Communicator* dp, const torch::Device& device);

 private:
  bool due(size_t task, int64_t step) const;

  TaskSuite suite_;
  TaskBatching batching_;
  int64_t max_steps_ = 0;
  std::vector<std::string> columns_;
};

}  // namespace moelab
