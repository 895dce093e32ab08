// Evaluates a saved model: the model is rebuilt from the config stored in the
// checkpoint, its weights loaded by name, and the split's loss computed exactly
// as during training. Runs at any world size (experts are not split: ep = 1).
#pragma once

#include <cstdint>
#include <string>

namespace moelab {

struct EvalCheckpointOptions {
  std::string checkpoint;
  std::string data_dir;  // "" = the dir of the run's first validation set
  std::string split;     // "" = the split of the run's first validation set
  int64_t max_windows = 0;
  int64_t batch_seqs = 16;
};

struct EvalCheckpointResult {
  int64_t step = 0;
  std::string split;
  double loss = 0;
  int64_t tokens = 0;
};

EvalCheckpointResult evaluate_checkpoint(const EvalCheckpointOptions& opts);

}  // namespace moelab
