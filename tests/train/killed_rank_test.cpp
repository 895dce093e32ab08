// Failure behaviour: SIGKILL one rank of a 2-rank expert-parallel run in the
// middle of training; the whole job must end within 30 s, non-zero, with a
// message that names the lost rank, instead of the survivor hanging in a
// collective.
#include <gtest/gtest.h>

#include "common/temp_dir.h"
#include "train/job_control.h"

namespace moelab::testing {
namespace {

TEST(KilledRank, EndsTheWholeJobWithinThirtySeconds) {
  TempDir dir;
  const fs::path root = dir.str();
  // Far more steps than the test waits for: the job can only end by failing.
  write_tiny_moe_job(root, "");
  const pid_t mpirun =
      spawn(mpirun_command(2) + MOELAB_BINARY + " train " + (root / "run.toml").string() +
            " --set train.max_steps=1000000 --out " + (root / "run").string() + " > " +
            (root / "train.log").string() + " 2>&1");
  ASSERT_GT(mpirun, 0);
  // Both ranks are stepping once rank 0 has written a few metrics lines.
  ASSERT_TRUE(wait_for_lines(root / "run" / "metrics.jsonl", 3, mpirun))
      << read_text(root / "train.log");
  const pid_t rank1 = find_rank(mpirun, 1);
  ASSERT_GT(rank1, 0) << "no child of mpirun has OMPI_COMM_WORLD_RANK=1";
  ASSERT_EQ(kill(rank1, SIGKILL), 0);

  double seconds = 0;
  const auto status = wait_exit(mpirun, std::chrono::seconds(30), &seconds);
  const std::string log = read_text(root / "train.log");
  ASSERT_TRUE(status) << "job still running 30 s after rank 1 was killed:\n" << log;
  std::printf("job ended %.1f s after rank 1 was killed\n", seconds);
  EXPECT_FALSE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << log;
  EXPECT_NE(log.find("rank 1"), std::string::npos) << log;
  EXPECT_FALSE(fs::exists(root / "run" / "DONE"));
}

}  // namespace
}  // namespace moelab::testing
