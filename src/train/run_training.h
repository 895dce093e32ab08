// The entry point of a training run, without the trainer's machinery: what the
// command line needs to start one and report how it ended.
#pragma once

#include <cstdint>

#include "config/config.h"

namespace moelab {

struct TrainSummary {
  int64_t steps = 0;  // optimizer steps completed (skipped non-finite steps included)
  int64_t tokens = 0;
  double best_val_loss = 0;
  double last_val_loss = 0;
  int64_t nonfinite_steps = 0;
  bool stopped_nonfinite = false;  // too many non-finite losses in a row
  bool stopped_by_signal = false;  // a stop signal (stop_signal.h): checkpoint saved, no DONE
};

// Collective: Trainer(cfg).train() (train/trainer.h).
TrainSummary run_training(const Config& cfg);

}  // namespace moelab
