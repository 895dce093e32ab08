#include "train/lr_schedule.h"

#include <gtest/gtest.h>

#include <cmath>

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
  EXPECT_DOUBLE_EQ(lr_at(0, 110, cfg), 0.0);
  EXPECT_DOUBLE_EQ(lr_at(1, 110, cfg), 1e-4);
  EXPECT_DOUBLE_EQ(lr_at(5, 110, cfg), 5e-4);
  EXPECT_DOUBLE_EQ(lr_at(10, 110, cfg), 1e-3);
  // Halfway through the decay the cosine term is 1/2: floor + (lr - floor) / 2.
  EXPECT_NEAR(lr_at(60, 110, cfg), 1e-4 + 0.5 * 9e-4, 1e-15);
  // A quarter in: (1 + cos(pi/4)) / 2.
  EXPECT_NEAR(lr_at(35, 110, cfg), 1e-4 + 9e-4 * 0.5 * (1 + std::sqrt(0.5)), 1e-15);
  EXPECT_NEAR(lr_at(110, 110, cfg), 1e-4, 1e-15);
  EXPECT_NEAR(lr_at(500, 110, cfg), 1e-4, 1e-15);
}

TEST(LrSchedule, NoWarmupStartsAtThePeak) {
  const OptimConfig cfg = schedule(2.0, 0.0, 0);
  EXPECT_DOUBLE_EQ(lr_at(0, 100, cfg), 2.0);
  EXPECT_NEAR(lr_at(50, 100, cfg), 1.0, 1e-12);
  EXPECT_NEAR(lr_at(100, 100, cfg), 0.0, 1e-12);
}

TEST(LrSchedule, WarmupLongerThanTrainingNeverDecays) {
  const OptimConfig cfg = schedule(1.0, 0.1, 100);
  EXPECT_DOUBLE_EQ(lr_at(50, 50, cfg), 0.5);
  EXPECT_DOUBLE_EQ(lr_at(100, 50, cfg), 1.0);
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
