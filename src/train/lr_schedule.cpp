#include "train/lr_schedule.h"

#include <algorithm>
#include <cmath>

namespace moelab {

double lr_at(int64_t step, int64_t max_steps, const OptimConfig& cfg) {
  const int64_t warmup = std::max<int64_t>(cfg.warmup_steps, 0);
  if (step < warmup) {
    return cfg.lr * static_cast<double>(std::max<int64_t>(step, 0)) / static_cast<double>(warmup);
  }
  if (max_steps <= warmup) return cfg.lr;
  const double floor = cfg.lr * cfg.min_lr_ratio;
  const double progress = std::clamp(
      static_cast<double>(step - warmup) / static_cast<double>(max_steps - warmup), 0.0, 1.0);
  return floor + (cfg.lr - floor) * 0.5 * (1.0 + std::cos(M_PI * progress));
}

void set_lr(torch::optim::Optimizer& optimizer, double lr) {
  for (auto& group : optimizer.param_groups()) group.options().set_lr(lr);
}

}  // namespace moelab
