// Preemption, time limits, peers that stop answering and stragglers, on one
// host, 2 ranks with the experts split over both: a stop
// signal to one rank stops every rank at the same step with a checkpoint
// (exit 3) and the resumed run continues the uninterrupted curve bitwise; a
// frozen rank ends the job within parallel.timeout_s + 30 s with a message
// naming it, and the run resumes from its last checkpoint as if never stopped;
// metrics.jsonl shows the slowest rank's phase times next to the mean.
#include <gtest/gtest.h>

#include "common/temp_dir.h"
#include "train/job_control.h"

namespace moelab::testing {
namespace {

constexpr int kSteps = 300;

class TwoRankJob : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = dir_.str();
    write_tiny_moe_job(root_, "[checkpoint]\ninterval = 2\nkeep = 100\n");
  }
  // 2 ranks, experts split over both.
  std::string train(const std::string& run, const std::string& extra = "") const {
    return mpirun_command(2) + MOELAB_BINARY + " train " + (root_ / "run.toml").string() +
           " --set train.max_steps=" + std::to_string(kSteps) +
           " --set eval.interval=50 --set parallel.timeout_s=5 --out " + (root_ / run).string() +
           " " + extra + " >> " + (root_ / (run + ".log")).string() + " 2>&1";
  }
  std::string log(const std::string& run) const { return read_text(root_ / (run + ".log")); }
  // The uninterrupted run's loss log.
  std::vector<std::pair<int64_t, double>> reference() {
    EXPECT_EQ(std::system(train("full").c_str()), 0) << log("full");
    return loss_log(root_ / "full");
  }

  TempDir dir_;
  fs::path root_;
};

// The step of the newest checkpoint in `run`, -1 when there is none.
int64_t newest_checkpoint(const fs::path& run) {
  int64_t newest = -1;
  if (!fs::exists(run / "checkpoints")) return newest;
  for (const auto& entry : fs::directory_iterator(run / "checkpoints")) {
    const std::string name = entry.path().filename();
    if (name.rfind("step_", 0) == 0) newest = std::max<int64_t>(newest, std::stoll(name.substr(5)));
  }
  return newest;
}

TEST_F(TwoRankJob, SignalToOneRankStopsEveryRankWithACheckpointAndResumesExactly) {
  const pid_t job = spawn(train("cut"));
  ASSERT_TRUE(wait_for_lines(root_ / "cut" / "metrics.jsonl", 5, job)) << log("cut");
  const pid_t rank1 = find_rank(job, 1);
  ASSERT_GT(rank1, 0);
  ASSERT_EQ(kill(rank1, SIGUSR1), 0);  // as Slurm's --signal=USR1@SECONDS would
  double seconds = 0;
  const auto status = wait_exit(job, std::chrono::seconds(60), &seconds);
  ASSERT_TRUE(status) << log("cut");
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 3) << log("cut");
  EXPECT_FALSE(fs::exists(root_ / "cut" / "DONE"));
  // Both ranks stopped after the same step, and that step is checkpointed.
  const auto cut = loss_log(root_ / "cut");
  ASSERT_FALSE(cut.empty());
  const int64_t stopped_at = cut.back().first;
  EXPECT_LT(stopped_at, kSteps);
  EXPECT_EQ(newest_checkpoint(root_ / "cut"), stopped_at) << log("cut");
  EXPECT_NE(log("cut").find("checkpoint saved at step " + std::to_string(stopped_at)),
            std::string::npos)
      << log("cut");

  ASSERT_EQ(std::system(train("cut", "--resume auto").c_str()), 0) << log("cut");
  // It started after the checkpoint's step: no step at or before it ran again.
  EXPECT_NE(log("cut").find("(step " + std::to_string(stopped_at) + ")"), std::string::npos)
      << log("cut");
  EXPECT_TRUE(fs::exists(root_ / "cut" / "DONE"));
  EXPECT_EQ(loss_log(root_ / "cut"), reference());
}

TEST_F(TwoRankJob, FrozenRankEndsTheJobWithinTimeoutAndResumesExactly) {
  const pid_t job = spawn(train("frozen"));
  ASSERT_TRUE(wait_for_lines(root_ / "frozen" / "metrics.jsonl", 5, job)) << log("frozen");
  const pid_t rank1 = find_rank(job, 1);
  ASSERT_GT(rank1, 0);
  ASSERT_EQ(kill(rank1, SIGSTOP), 0);
  double seconds = 0;
  const auto status = wait_exit(job, std::chrono::seconds(5 + 30), &seconds);
  kill(rank1, SIGKILL);  // should it have outlived the job
  ASSERT_TRUE(status) << "job still running 35 s after rank 1 froze:\n" << log("frozen");
  std::printf("job ended %.1f s after rank 1 froze (parallel.timeout_s = 5)\n", seconds);
  EXPECT_FALSE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << log("frozen");
  EXPECT_NE(log("frozen").find("parallel.timeout_s = 5"), std::string::npos) << log("frozen");
  EXPECT_NE(log("frozen").find("rank 1 ("), std::string::npos) << log("frozen");
  EXPECT_NE(log("frozen").find("no heartbeat"), std::string::npos) << log("frozen");

  ASSERT_EQ(std::system(train("frozen", "--resume auto").c_str()), 0) << log("frozen");
  EXPECT_EQ(loss_log(root_ / "frozen"), reference());
}

}  // namespace
}  // namespace moelab::testing

namespace moelab::testing {
namespace {

// Overlapping the gradient all-reduce with backward changes when buckets are
// exchanged, not what is summed: the same curve bitwise.
TEST_F(TwoRankJob, OverlappedGradientSyncTrainsTheSameCurve) {
  const std::string sets = "--set train.max_steps=20 --set parallel.ep=1";
  ASSERT_EQ(std::system(train("overlap", sets).c_str()), 0) << log("overlap");
  ASSERT_EQ(
      std::system(train("no_overlap", sets + " --set parallel.overlap_grad_sync=false").c_str()), 0)
      << log("no_overlap");
  const auto overlapped = loss_log(root_ / "overlap");
  EXPECT_EQ(overlapped.size(), 20u);
  EXPECT_EQ(overlapped, loss_log(root_ / "no_overlap"));
}

TEST_F(TwoRankJob, MetricsShowTheSlowestRanksPhasesNextToTheMean) {
  ASSERT_EQ(std::system(train("stragglers", "--set train.max_steps=4").c_str()), 0)
      << log("stragglers");
  std::ifstream in(root_ / "stragglers" / "metrics.jsonl");
  std::string line;
  int lines = 0;
  while (std::getline(in, line)) {
    const auto r = nlohmann::json::parse(line);
    const auto& slowest = r.at("time_ms_slowest");
    const int rank = slowest.at("rank").get<int>();
    EXPECT_TRUE(rank == 0 || rank == 1) << line;
    double slowest_total = 0, mean_total = 0;
    for (const auto& [phase, ms] : r.at("time_ms").items()) {
      slowest_total += slowest.at(phase).get<double>();
      mean_total += r.at("time_ms_mean").at(phase).get<double>();
    }
    EXPECT_GE(slowest_total, mean_total) << line;
    if (rank == 0) EXPECT_EQ(slowest.at("data"), r.at("time_ms").at("data")) << line;
    ++lines;
  }
  EXPECT_EQ(lines, 4);
}

}  // namespace
}  // namespace moelab::testing
