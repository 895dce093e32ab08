// Learning-rate schedules: a linear warmup from 0 over optim.warmup_steps, then
// (optim.schedule)
//   "cosine":   a half cosine from lr down to lr * min_lr_ratio at max_steps;
//   "linear":   a straight line from lr down to the same floor;
//   "constant": lr;
//   "wsd":      warmup-stable-decay: lr until the last decay_fraction of
//               max_steps, then down to the floor along optim.decay_shape,
//               "linear" or "sqrt" (1 - sqrt(progress), Hägele et al. 2024).
// The floor holds after max_steps. A WSD run resumed from a checkpoint in its
// stable phase with a larger max_steps simply stays stable longer and decays
// at its new end: the usual way to branch a compute-budget sweep off one run.
#pragma once

#include <torch/torch.h>

#include <cstdint>

#include "config/config.h"

namespace moelab {

class LrSchedule {
 public:
  LrSchedule(const OptimConfig& cfg, int64_t max_steps);

  // `step` is the number of the update about to be applied, counting from 1 (so
  // step 0, "before training", gives 0 when warming up).
  double at(int64_t step) const;

 private:
  // Fraction of the way from lr (0) to the floor (1) at `progress` in [0, 1].
  double decayed(double progress) const;

  double lr_, floor_;
  int64_t warmup_, decay_start_, max_steps_;
  Schedule kind_;
  DecayShape shape_;
};

// Sets the learning rate of every parameter group.
void set_lr(torch::optim::Optimizer& optimizer, double lr);

}  // namespace moelab
