// Which paths of the experts' GEMMs can run a shape, the path taken without
// measuring, the measured choice's rule, and the timing it rests on.
#include "model/expert_gemm.h"

#include <gtest/gtest.h>

#include <vector>

#include "kernels/grouped_matmul.h"

namespace moelab {
namespace {

ExpertShape shape(c10::ScalarType dtype, std::vector<int64_t> widths = {32},
                  const torch::Device& device = torch::kCPU) {
  return {64, std::move(widths), 4, dtype, device};
}

TEST(ExpertGemm, ExpertsOfSeveralWidthsOrOfNoFloatTypeRunOnlyPerExpert) {
  const std::vector<ExpertGemm> per_expert = {ExpertGemm::kPerExpert};
  EXPECT_EQ(runnable_paths(shape(torch::kFloat, {32, 16})), per_expert);
  EXPECT_EQ(runnable_paths(shape(torch::kDouble)), per_expert);
  EXPECT_EQ(rule_path(shape(torch::kBFloat16, {32, 16})), ExpertGemm::kPerExpert);
  EXPECT_FALSE(can_run(ExpertGemm::kAuto, shape(torch::kFloat)));
}

TEST(ExpertGemm, GroupedNeedsItsTilesAndOnCudaBf16) {
  // Widths the CPU kernel's 16-column tiles do not divide.
  EXPECT_FALSE(can_run(ExpertGemm::kGrouped, shape(torch::kFloat, {24})));
  EXPECT_TRUE(can_run(ExpertGemm::kPadded, shape(torch::kFloat, {24})));
  EXPECT_EQ(can_run(ExpertGemm::kGrouped, shape(torch::kFloat)),
            grouped_matmul_has_cpu_kernel(torch::kFloat));
  // cuBLAS runs fp32 experts one at a time; _grouped_mm wants bf16 rows of 16 bytes.
  EXPECT_FALSE(can_run(ExpertGemm::kGrouped, shape(torch::kFloat, {32}, torch::kCUDA)));
  EXPECT_TRUE(can_run(ExpertGemm::kGrouped, shape(torch::kBFloat16, {32}, torch::kCUDA)));
  EXPECT_FALSE(can_run(ExpertGemm::kGrouped, shape(torch::kBFloat16, {36}, torch::kCUDA)));
  EXPECT_FALSE(can_run(ExpertGemm::kGroupedAvx512, shape(torch::kFloat)));
  EXPECT_EQ(can_run(ExpertGemm::kGroupedAvx512, shape(torch::kBFloat16)), grouped_matmul_has_amx());
}

TEST(ExpertGemm, TheRuleTakesTheGroupedKernelElsePaddedBf16OnACpuElsePerExpert) {
  EXPECT_EQ(rule_path(shape(torch::kBFloat16, {32}, torch::kCUDA)), ExpertGemm::kGrouped);
  EXPECT_EQ(rule_path(shape(torch::kFloat, {32}, torch::kCUDA)), ExpertGemm::kPerExpert);
  EXPECT_EQ(rule_path(shape(torch::kBFloat16, {24})), ExpertGemm::kPadded);
  EXPECT_EQ(rule_path(shape(torch::kFloat, {24})), ExpertGemm::kPerExpert);
}

TEST(ExpertGemm, TheIncumbentStaysUnlessAnotherIsTenPercentFasterAndItTakesAMillisecond) {
  const auto timings = [](double grouped, double per_expert) {
    return std::vector<PathTiming>{{ExpertGemm::kGrouped, grouped},
                                   {ExpertGemm::kPerExpert, per_expert},
                                   {ExpertGemm::kPadded, 1.0}};
  };
  EXPECT_EQ(fastest_path(timings(0.50, 0.47), ExpertGemm::kGrouped), ExpertGemm::kGrouped);
  EXPECT_EQ(fastest_path(timings(0.50, 0.40), ExpertGemm::kGrouped), ExpertGemm::kPerExpert);
  EXPECT_EQ(fastest_path(timings(0.30, 0.40), ExpertGemm::kPerExpert), ExpertGemm::kGrouped);
  // Under a millisecond, nothing to win.
  EXPECT_EQ(fastest_path(timings(3e-4, 1e-4), ExpertGemm::kGrouped), ExpertGemm::kGrouped);
  EXPECT_EQ(fastest_path(timings(3e-3, 1e-3), ExpertGemm::kGrouped), ExpertGemm::kPerExpert);
  // An incumbent that was not timed does not stand in the way.
  EXPECT_EQ(fastest_path(timings(0.5, 0.6), ExpertGemm::kGroupedAvx512), ExpertGemm::kGrouped);
}

TEST(ExpertGemm, EveryRunnablePathIsTimedOnce) {
  const ExpertShape s = shape(torch::kFloat);
  const auto timings = time_expert_paths(s, 8, 2);
  const auto paths = runnable_paths(s);
  ASSERT_EQ(timings.size(), paths.size());
  for (size_t i = 0; i < paths.size(); ++i) {
    EXPECT_EQ(timings[i].path, paths[i]);
    EXPECT_GT(timings[i].seconds, 0.0);
  }
  EXPECT_NE(describe(timings).find("per_expert "), std::string::npos) << describe(timings);
}

// A run measures after its weights are drawn: measuring must not move the
// random state that dropout-free training still reads (the data order, a
// resume that did not measure).
TEST(ExpertGemm, TimingLeavesTheRandomStateAsItWas) {
  torch::manual_seed(11);
  const auto expected = torch::rand({4});
  torch::manual_seed(11);
  time_expert_paths(shape(torch::kFloat), 4, 1);
  EXPECT_TRUE(torch::equal(torch::rand({4}), expected));
}

}  // namespace
}  // namespace moelab
