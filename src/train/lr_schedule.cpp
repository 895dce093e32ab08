#include "train/lr_schedule.h"

#include <algorithm>
#include <cmath>

namespace moelab {

LrSchedule::LrSchedule(const OptimConfig& cfg, int64_t max_steps)
    : lr_(cfg.lr),
      floor_(cfg.lr * cfg.min_lr_ratio),
      warmup_(std::max<int64_t>(cfg.warmup_steps, 0)),
      max_steps_(max_steps),
      kind_(cfg.schedule),
      shape_(cfg.decay_shape) {
  const auto decay_steps = int64_t(std::llround(cfg.decay_fraction * double(max_steps)));
  decay_start_ = kind_ == Schedule::kWsd ? std::max(warmup_, max_steps - decay_steps) : warmup_;
}

double LrSchedule::decayed(double progress) const {
  switch (kind_) {
    case Schedule::kCosine:
      return 0.5 * (1.0 - std::cos(M_PI * progress));
    case Schedule::kLinear:
      return progress;
    case Schedule::kConstant:
      return 0.0;
    case Schedule::kWsd:
      return shape_ == DecayShape::kSqrt ? std::sqrt(progress) : progress;
  }
  return 0.0;
}

double LrSchedule::at(int64_t step) const {
  if (step < warmup_) return lr_ * double(std::max<int64_t>(step, 0)) / double(warmup_);
  if (max_steps_ <= decay_start_) return lr_;
  const double progress =
      std::clamp(double(step - decay_start_) / double(max_steps_ - decay_start_), 0.0, 1.0);
  return lr_ - (lr_ - floor_) * decayed(progress);
}

void set_lr(torch::optim::Optimizer& optimizer, double lr) {
  for (auto& group : optimizer.param_groups()) group.options().set_lr(lr);
}

}  // namespace moelab
