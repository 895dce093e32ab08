#include "train/lr_schedule.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

namespace moelab {
namespace {

OptimConfig schedule(double lr, double min_ratio, int64_t warmup) {
  OptimConfig cfg;
  cfg.lr = lr;
  cfg.min_lr_ratio = min_ratio;
  cfg.warmup_steps = warmup;
  return cfg;
}

TEST(LrSchedule, WarmupThenCosineToTheFloor) {
  const OptimConfig cfg = schedule(1e-3, 0.1, 10);
  EXPECT_DOUBLE_EQ(LrSchedule(cfg, 110).at(0), 0.0);
  EXPECT_DOUBLE_EQ(LrSchedule(cfg, 110).at(1), 1e-4);
  EXPECT_DOUBLE_EQ(LrSchedule(cfg, 110).at(5), 5e-4);
  EXPECT_DOUBLE_EQ(LrSchedule(cfg, 110).at(10), 1e-3);
  // Halfway through the decay the cosine term is 1/2: floor + (lr - floor) / 2.
  EXPECT_NEAR(LrSchedule(cfg, 110).at(60), 1e-4 + 0.5 * 9e-4, 1e-15);
  // A quarter in: (1 + cos(pi/4)) / 2.
  EXPECT_NEAR(LrSchedule(cfg, 110).at(35), 1e-4 + 9e-4 * 0.5 * (1 + std::sqrt(0.5)), 1e-15);
  EXPECT_NEAR(LrSchedule(cfg, 110).at(110), 1e-4, 1e-15);
  EXPECT_NEAR(LrSchedule(cfg, 110).at(500), 1e-4, 1e-15);
}

TEST(LrSchedule, NoWarmupStartsAtThePeak) {
  const OptimConfig cfg = schedule(2.0, 0.0, 0);
  EXPECT_DOUBLE_EQ(LrSchedule(cfg, 100).at(0), 2.0);
  EXPECT_NEAR(LrSchedule(cfg, 100).at(50), 1.0, 1e-12);
  EXPECT_NEAR(LrSchedule(cfg, 100).at(100), 0.0, 1e-12);
}

TEST(LrSchedule, WarmupLongerThanTrainingNeverDecays) {
  const OptimConfig cfg = schedule(1.0, 0.1, 100);
  EXPECT_DOUBLE_EQ(LrSchedule(cfg, 50).at(50), 0.5);
  EXPECT_DOUBLE_EQ(LrSchedule(cfg, 50).at(100), 1.0);
}

// The closed forms, written out independently of LrSchedule: for every step of
// a 100-step run with 10 warmup steps, peak 1e-3 and floor 1e-4.
double expected_lr(const std::string& kind, const std::string& shape, int64_t step) {
  const double lr = 1e-3, floor = 1e-4;
  if (step < 10) return lr * step / 10.0;
  const int64_t start = kind == "wsd" ? 75 : 10;  // wsd: the last 25 of 100 steps decay
  const double p = std::min(1.0, std::max(0.0, (step - start) / double(100 - start)));
  if (kind == "cosine") return floor + (lr - floor) * 0.5 * (1 + std::cos(M_PI * p));
  if (kind == "linear") return lr + (floor - lr) * p;
  if (kind == "constant") return lr;
  return lr - (lr - floor) * (shape == "sqrt" ? std::sqrt(p) : p);
}

TEST(LrSchedule, EveryScheduleEqualsItsClosedFormAtEveryStep) {
  for (const auto& [kind, shape] :
       std::vector<std::pair<std::string, std::string>>{{"cosine", "linear"},
                                                        {"linear", "linear"},
                                                        {"constant", "linear"},
                                                        {"wsd", "linear"},
                                                        {"wsd", "sqrt"}}) {
    OptimConfig cfg = schedule(1e-3, 0.1, 10);
    cfg.schedule = *parse_choice<Schedule>(kind);
    cfg.decay_shape = *parse_choice<DecayShape>(shape);
    cfg.decay_fraction = 0.25;
    const LrSchedule lr(cfg, 100);
    for (int64_t step = 0; step <= 120; ++step) {
      EXPECT_NEAR(lr.at(step), expected_lr(kind, shape, step), 1e-15)
          << kind << " " << shape << " step " << step;
    }
  }
}

TEST(LrSchedule, WsdStaysStableUntilItsLastFraction) {
  OptimConfig cfg = schedule(1.0, 0.0, 0);
  cfg.schedule = Schedule::kWsd;
  cfg.decay_fraction = 0.2;
  // Branching a longer run off a stable-phase checkpoint: the same step is
  // still at the peak, and the decay moves to the new end.
  EXPECT_DOUBLE_EQ(LrSchedule(cfg, 100).at(80), 1.0);
  EXPECT_DOUBLE_EQ(LrSchedule(cfg, 100).at(90), 0.5);
  EXPECT_DOUBLE_EQ(LrSchedule(cfg, 200).at(90), 1.0);
  EXPECT_DOUBLE_EQ(LrSchedule(cfg, 200).at(180), 0.5);
}

TEST(LrSchedule, SetLrReachesEveryGroup) {
  torch::Tensor a = torch::zeros({2, 2}, torch::requires_grad());
  torch::Tensor b = torch::zeros({2}, torch::requires_grad());
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(std::vector<torch::Tensor>{a});
  groups.emplace_back(std::vector<torch::Tensor>{b});
  torch::optim::AdamW optimizer(std::move(groups), torch::optim::AdamWOptions(1.0));
  set_lr(optimizer, 0.25);
  for (auto& group : optimizer.param_groups()) EXPECT_DOUBLE_EQ(group.options().get_lr(), 0.25);
}

}  // namespace
}  // namespace moelab
