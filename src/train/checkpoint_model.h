// A saved model rebuilt from the config stored in its checkpoint, at the
// (world, ep) layout asked for, its weights loaded by name.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>

#include "config/config.h"
#include "model/transformer.h"
#include "parallel/parallel_plan.h"

namespace moelab {

// A saved model rebuilt from its checkpoint's config at this world and `ep`,
// its weights loaded: what `moelab eval` and `moelab analyze` run.
struct CheckpointModel {
  Config cfg;
  int64_t step = 0;
  std::unique_ptr<ParallelPlan> plan;
  Transformer model{nullptr};
  torch::Device device = torch::kCPU;
};

// Collective (defined in evaluate_checkpoint.cpp, beside its first user).
CheckpointModel load_checkpoint_model(const std::string& checkpoint, int64_t ep);

}  // namespace moelab
