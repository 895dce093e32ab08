// A run's checkpoint: model and optimizer tensors by parameter name (experts
// under their global id) plus the loop state, saved collectively so the same
// checkpoint loads at any world size and expert-parallel layout.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <limits>
#include <optional>

#include "comm/process_groups.h"
#include "config/config.h"
#include "data/batch_loader.h"
#include "model/experts.h"
#include "parallel/parallel_plan.h"

namespace moelab {

struct TrainState {
  int64_t step = 0;
  int64_t tokens = 0;
  LoaderState loader;
  double best_val_loss = std::numeric_limits<double>::infinity();
  int64_t nonfinite_total = 0;
  int64_t nonfinite_in_a_row = 0;
};

// Rank 0 writes the replicated tensors and the model's buffers (state without
// gradient, the same on every rank: the routing biases); the first holder of
// each expert writes that expert's tensors; rank 0 then checksums and
// publishes the folder. Stacked expert parameters (ParallelPlan's
// stacked_parameters()) are saved one tensor per expert, and the optimizer
// state is full-size by parameter name whatever the layout (ParallelPlan
// gathers a sharded one first), so any layout resumes it.
void save_run_checkpoint(const Config& cfg, const ParallelPlan& plan, const NamedParams& buffers,
                         const torch::optim::AdamW& optimizer, const TrainState& state);

// Per checkpoint.resume: "none" → nullopt; "auto" → the newest valid checkpoint
// in the run folder (nullopt if there is none); a path → that checkpoint.
// Loads this rank's parameters and optimizer state (expert rows stacked as
// `stacked` says); InputError naming the
// checkpoint and tensor when it does not fit the model.
std::optional<TrainState> restore_run_checkpoint(const Config& cfg, const ParallelPlan& plan,
                                                 const NamedParams& buffers,
                                                 torch::optim::AdamW& optimizer);

// train.init_from: a fresh run's parameters from a checkpoint's weights (any
// moelab checkpoint of the same model, or one `moelab upcycle` / `convert`
// wrote), and the buffers the checkpoint holds; the optimizer and the loop start
// anew. InputError naming the checkpoint and tensor when it does not fit.
void load_initial_weights(const std::string& dir, const NamedParams& params,
                          const StackedParams& stacked, const NamedParams& buffers);

}  // namespace moelab
