// Preemption, time limits, peers that stop answering, peers that are only
// slow, and stragglers, on one host, 2 ranks with the experts split over both:
// a stop signal to one rank stops every rank at the same step with a
// checkpoint (exit 3) and the resumed run continues from it, the uninterrupted
// curve bitwise; a frozen rank ends the job within parallel.timeout_s + 30 s
// with a message naming it, also while the ranks write a checkpoint slowly,
// and the run resumes from its last checkpoint; a checkpoint write slowed past
// parallel.timeout_s does not end the job, nor does rank 0 watching an old
// run lock longer than the timeout; metrics.jsonl names a rank slowed on
// purpose as the straggler.
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
  // 2 ranks, experts split over both; output appended to <log>.log. `hooks`:
  // the test entry point's options (util/test_hooks.h), which only it takes.
  std::string train(const std::string& run, const std::string& extra = "",
                    const std::string& log = "", const std::string& hooks = "") const {
    const std::string binary =
        hooks.empty() ? std::string(MOELAB_BINARY) : std::string(MOELAB_TEST_HOOKS) + " " + hooks;
    return mpirun_command(2) + binary + " train " + (root_ / "run.toml").string() +
           " --set train.max_steps=" + std::to_string(kSteps) +
           " --set eval.interval=50 --set parallel.timeout_s=5 --out " + (root_ / run).string() +
           " " + extra + " >> " + (root_ / ((log.empty() ? run : log) + ".log")).string() + " 2>&1";
  }
  std::string log(const std::string& name) const { return read_text(root_ / (name + ".log")); }
  // The uninterrupted run's loss log.
  std::vector<std::pair<int64_t, double>> reference() {
    EXPECT_EQ(std::system(train("full").c_str()), 0) << log("full");
    return loss_log(root_ / "full");
  }
  // Resumes `run` (its newest checkpoint at `step`) into <run>_resumed.log and
  // checks that it went on from there, to the uninterrupted curve.
  void expect_exact_resume(const std::string& run, int64_t step) {
    const std::string before = (root_ / (run + "_before.jsonl")).string();
    fs::copy_file(root_ / run / "metrics.jsonl", before);
    ASSERT_EQ(std::system(train(run, "--resume auto", run + "_resumed").c_str()), 0)
        << log(run + "_resumed");
    expect_resumed_from(root_ / run, log(run + "_resumed"), step, before);
    EXPECT_TRUE(fs::exists(root_ / run / "DONE"));
    EXPECT_EQ(loss_log(root_ / run), reference());
  }

  TempDir dir_;
  fs::path root_;
};

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
  expect_exact_resume("cut", stopped_at);
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
  expect_exact_resume("frozen", newest_checkpoint(root_ / "frozen"));
}

// Rank 1's checkpoint writes take 4 s longer (the test hook) against
// parallel.timeout_s = 2: rank 0, done first, waits for it in the checkpoint's
// collectives, sees it writing and progressing, and keeps waiting.
TEST_F(TwoRankJob, ACheckpointWriteSlowerThanTheTimeoutFinishesAndTheRunCompletes) {
  const std::string sets =
      "--set train.max_steps=4 --set parallel.timeout_s=2 --set checkpoint.interval=2";
  ASSERT_EQ(std::system(train("slow_write", sets, "", "--hook-slow-checkpoint=1:4").c_str()), 0)
      << log("slow_write");
  EXPECT_NE(log("slow_write").find("waits past parallel.timeout_s"), std::string::npos)
      << log("slow_write");
  EXPECT_TRUE(fs::exists(root_ / "slow_write" / "DONE"));
  EXPECT_EQ(newest_checkpoint(root_ / "slow_write"), 4);
}

// Rank 1's write slowed for a minute, and rank 1 frozen in the middle of it:
// its heartbeat stops, and rank 0 (waiting for it) ends the job within the
// timeout, naming it.
TEST_F(TwoRankJob, AFrozenRankIsCaughtInTimeWhileTheRanksWriteACheckpoint) {
  const std::string sets = "--set parallel.timeout_s=3 --set checkpoint.interval=4";
  const pid_t job = spawn(train("frozen_writing", sets, "", "--hook-slow-checkpoint=1:60"));
  // Rank 1's heartbeat says it is writing.
  const fs::path beat = root_ / "frozen_writing" / "heartbeats" / "rank1";
  const auto start = Clock::now();
  while (read_text(beat).find("checkpoint_write") == std::string::npos) {
    ASSERT_LT(Clock::now() - start, std::chrono::seconds(120)) << log("frozen_writing");
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const pid_t rank1 = find_rank(job, 1);
  ASSERT_GT(rank1, 0);
  ASSERT_EQ(kill(rank1, SIGSTOP), 0);
  double seconds = 0;
  const auto status = wait_exit(job, std::chrono::seconds(3 + 30), &seconds);
  kill(rank1, SIGKILL);
  ASSERT_TRUE(status) << "job still running 33 s after rank 1 froze:\n" << log("frozen_writing");
  std::printf("job ended %.1f s after rank 1 froze while writing (parallel.timeout_s = 3)\n",
              seconds);
  EXPECT_NE(log("frozen_writing").find("rank 1 ("), std::string::npos) << log("frozen_writing");
  EXPECT_NE(log("frozen_writing").find("no heartbeat"), std::string::npos) << log("frozen_writing");
}

// A lock left by a job on another host, its beat standing still: rank 0
// watches it 10 s (ten of its 1 s periods) before taking it over, past
// parallel.timeout_s = 2, and rank 1 waits for that verdict instead of ending
// the job.
TEST_F(TwoRankJob, ALockWatchedLongerThanTheTimeoutIsTakenOverAndTheJobRuns) {
  fs::create_directories(root_ / "stale");
  std::ofstream(root_ / "stale" / "run.lock")
      << R"({"host": "a-host-now-gone", "pid": 1, "started_unix_ms": 1, "refresh_s": 1, )"
      << R"("beat": 7})"
      << "\n";
  const std::string sets = "--set train.max_steps=2 --set parallel.timeout_s=2";
  ASSERT_EQ(std::system(train("stale", sets).c_str()), 0) << log("stale");
  EXPECT_NE(log("stale").find("taking over the lock of a job that is gone (host a-host-now-gone"),
            std::string::npos)
      << log("stale");
  EXPECT_TRUE(fs::exists(root_ / "stale" / "DONE"));
}

// checkpoint.async: rank 1's background write of the step-4 checkpoint fails
// (its file replaced, while the test hook holds the write back, by /dev/full,
// where every write gets "No space left on device"): the run ends with exit 1
// and that reason, removes the partial folder, and step 2 stays the newest.
TEST_F(TwoRankJob, ABackgroundWriteThatFailsEndsTheRun) {
  const std::string sets = "--set checkpoint.async=true --set checkpoint.interval=2";
  const pid_t job = spawn(train("refused", sets, "", "--hook-slow-checkpoint=1:3"));
  const fs::path file =
      root_ / "refused" / "checkpoints" / "step_00000004.tmp" / ".rank_00001.h5.tmp";
  // The file is created, laid out and closed before the held write reopens
  // it; replaced earlier, its creation fails instead (a loaded machine
  // widens that window). HDF5 writes its metadata when it closes the file.
  const auto start = Clock::now();
  std::error_code size_error;
  while (!fs::exists(file) || fs::file_size(file, size_error) == 0) {
    ASSERT_LT(Clock::now() - start, std::chrono::seconds(120)) << log("refused");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  fs::remove(file);
  fs::create_symlink("/dev/full", file);
  double seconds = 0;
  const auto status = wait_exit(job, std::chrono::seconds(60), &seconds);
  ASSERT_TRUE(status) << log("refused");
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 1) << log("refused");
  EXPECT_NE(log("refused").find("checkpoint at step 4 failed"), std::string::npos)
      << log("refused");
  EXPECT_NE(log("refused").find(".rank_00001.h5.tmp: cannot write (No space left on device)"),
            std::string::npos)
      << log("refused");
  EXPECT_EQ(log("refused").find("internal error"), std::string::npos) << log("refused");
  EXPECT_FALSE(fs::exists(root_ / "refused" / "checkpoints" / "step_00000004.tmp"));
  EXPECT_EQ(newest_checkpoint(root_ / "refused"), 2);
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

// Rank 1 works 150 ms longer every step (the test hook). Training is
// synchronous, so both ranks' steps take about as long: the straggler view
// counts each rank's own work (its step less its waits in collectives), and
// names rank 1 in every line, with the slowest rank's phases beside the mean.
TEST_F(TwoRankJob, TheStragglerViewNamesTheRankSlowedOnPurpose) {
  ASSERT_EQ(std::system(train("stragglers", "--set train.max_steps=5 --set eval.interval=0", "",
                              "--hook-slow-rank=1:150")
                            .c_str()),
            0)
      << log("stragglers");
  std::ifstream in(root_ / "stragglers" / "metrics.jsonl");
  std::string line;
  int lines = 0;
  while (std::getline(in, line)) {
    const auto r = nlohmann::json::parse(line);
    const auto& slowest = r.at("time_ms_slowest");
    EXPECT_EQ(slowest.at("rank").get<int>(), 1) << line;
    EXPECT_GE(slowest.at("work").get<double>(), 150.0) << line;
    EXPECT_LT(r.at("time_ms_mean").at("work").get<double>(), slowest.at("work").get<double>())
        << line;
    for (const auto& [phase, ms] : r.at("time_ms").items()) {
      EXPECT_TRUE(slowest.contains(phase) && r.at("time_ms_mean").contains(phase)) << line;
    }
    ++lines;
  }
  EXPECT_EQ(lines, 5);
}

}  // namespace
}  // namespace moelab::testing
