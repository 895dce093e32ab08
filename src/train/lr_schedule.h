// Learning-rate schedule: linear warmup from 0, then cosine decay to a floor.
#pragma once

#include <torch/torch.h>

#include <cstdint>

#include "config/config.h"

namespace moelab {

// `step` is the number of the update about to be applied, counting from 1 (so
// step 0, "before training", gives 0 when warming up). Steps 0..warmup_steps rise linearly
// from 0 to cfg.lr; from warmup_steps to max_steps a half cosine falls from cfg.lr
// to cfg.lr * cfg.min_lr_ratio, which holds after max_steps. With
// warmup_steps >= max_steps there is no decay phase.
double lr_at(int64_t step, int64_t max_steps, const OptimConfig& cfg);

// Sets the learning rate of every parameter group.
void set_lr(torch::optim::Optimizer& optimizer, double lr);

}  // namespace moelab
