// What one training run left in its folder, as the report needs it: the DONE
// record (only a finished run has one) and the validation curve from val.csv.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace moelab {

struct ValPoint {
  int64_t step = 0;
  int64_t tokens = 0;
  double val_loss = 0.0;  // the first validation set's
  // Each named validation set's loss (val.csv's val_loss/<name> columns).
  std::vector<std::pair<std::string, double>> sets;
  // Each downstream task score of this row ("<task>/<metric>" from val.csv's
  // task/<task>/<metric> columns), where the task was scored.
  std::vector<std::pair<std::string, double>> tasks;
};

struct DoneRecord {
  int64_t steps = 0;
  int64_t tokens = 0;
  std::optional<double> best_val_loss;  // null when the run never validated
  std::optional<double> final_val_loss;
  int64_t nonfinite_steps = 0;
  double wall_seconds = 0.0;
};

struct RunResult {
  std::string variant;
  int64_t seed = 0;
  std::string dir;
  std::optional<DoneRecord> done;  // set only for a usable finished run
  std::vector<ValPoint> curve;
  std::string problem;  // why the run is not usable ("" when done is set)
};

// Reads val.csv (header `step,tokens,val_loss,best_val_loss`, then any
// `val_loss/<name>` columns, then any `task/<task>/<metric>` ones, whose cells
// may be empty); InputError naming the file and line for anything else.
std::vector<ValPoint> read_val_csv(const std::string& path);
DoneRecord read_done(const std::string& path);

// Never throws for a missing or broken run: the reason goes into `problem`.
RunResult read_run_result(const std::string& variant, int64_t seed, const std::string& dir);

}  // namespace moelab
