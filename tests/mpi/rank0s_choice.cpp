// ranks: 2 4
// What a run measures (the experts' GEMM path, "auto" precision on a CPU) is
// rank 0's choice on every rank, whatever each rank measured: all ranks run alike.
#include "comm/rank0s_choice.h"
#include "comm/process_groups.h"
#include "model/expert_gemm.h"
#include "model/precision.h"
#include "mpi_gtest_main.h"

namespace moelab {
namespace {

TEST(Rank0sChoice, EveryRankTakesRankZerosPath) {
  auto world = make_process_groups(1, 1, Backend::kMpi, false).world;
  const ExpertGemm mine = world->rank() == 0 ? ExpertGemm::kPadded : ExpertGemm::kPerExpert;
  EXPECT_EQ(rank0s_choice(mine, *world), ExpertGemm::kPadded) << "rank " << world->rank();
}

// Rank 0 measures bf16 matmul at twice fp32's rate, the others at half.
TEST(Rank0sChoice, EveryRankTakesRankZerosAutoPrecision) {
  auto world = make_process_groups(1, 1, Backend::kMpi, false).world;
  CpuFeatures cpu;
  cpu.avx512_bf16 = true;
  const auto rates = world->rank() == 0 ? +[] { return MatmulRates{2e11, 1e11}; } : +[] {
    return MatmulRates{1e11, 2e11};
  };
  const auto choice = agreed_precision(Precision::kAuto, torch::kCPU, *world, cpu, rates);
  EXPECT_EQ(choice.precision, Precision::kBf16)
      << "rank " << world->rank() << ": " << choice.reason;
}

}  // namespace
}  // namespace moelab

int main(int argc, char** argv) {
  return moelab::run_mpi_tests(&argc, &argv);
}
