// The training loop: one call trains one run, collectively over every MPI rank.
#pragma once

#include <cstdint>
#include <string>

#include "config/config.h"

namespace moelab {

struct TrainSummary {
  int64_t steps = 0;  // optimizer steps completed (skipped non-finite steps included)
  int64_t tokens = 0;
  double best_val_loss = 0;
  double last_val_loss = 0;
  int64_t nonfinite_steps = 0;
  bool stopped_nonfinite = false;  // too many non-finite losses in a row
};

// Trains `cfg` into cfg.train.out_dir: config.resolved.toml, run.json,
// metrics.jsonl, val.csv, checkpoints/, and DONE when the run completed.
TrainSummary run_training(const Config& cfg);

}  // namespace moelab
