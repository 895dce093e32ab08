// ranks: 2 4
// The experts' GEMM path a run measures is rank 0's on every rank, whatever
// each rank measured: all ranks run one path.
#include "comm/process_groups.h"
#include "mpi_gtest_main.h"
#include "train/expert_gemm_choice.h"

namespace moelab {
namespace {

TEST(ExpertGemmAgreement, EveryRankTakesRankZerosPath) {
  auto world = make_process_groups(1, 1, Backend::kMpi, false).world;
  const ExpertGemm mine = world->rank() == 0 ? ExpertGemm::kPadded : ExpertGemm::kPerExpert;
  EXPECT_EQ(rank0s_path(mine, *world), ExpertGemm::kPadded) << "rank " << world->rank();
}

}  // namespace
}  // namespace moelab

int main(int argc, char** argv) {
  return moelab::run_mpi_tests(&argc, &argv);
}
