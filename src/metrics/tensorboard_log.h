// Rank 0's TensorBoard curves: event files in <run>/tb/ holding every number of
// each metrics.jsonl record and val.csv row, so `tensorboard --logdir runs/`
// (or a study's folder) shows runs live, each under its folder's path.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "metrics/event_file.h"

namespace moelab {

// The values TensorBoard gets from one metrics record: each number (booleans
// and "step" aside) as a scalar tagged by its path, nested keys and array
// indices joined by '/' ("time_ms/data", "moe/drop_fraction/0"); an array of
// number arrays (per-layer expert load) as one histogram per inner array.
std::vector<SummaryValue> summary_values(const nlohmann::json& record);

class TensorBoardLog {
 public:
  // resumed_step < 0 starts afresh: earlier event files in <run_dir>/tb are
  // removed. Otherwise they keep their records up to resumed_step (as
  // metrics.jsonl keeps its lines) and a new file continues after them.
  TensorBoardLog(const std::string& run_dir, int64_t resumed_step);
  // summary_values(record) at record["step"], flushed.
  void write_metrics(const nlohmann::json& record);
  // "val_loss", "best_val_loss" and each (tag, loss) of `sets` at `step`, flushed.
  void write_validation(int64_t step, double val_loss, double best_val_loss,
                        const std::vector<std::pair<std::string, double>>& sets = {});

 private:
  std::unique_ptr<EventFileWriter> writer_;
};

}  // namespace moelab
