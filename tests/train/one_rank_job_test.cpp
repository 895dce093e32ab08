// A run started by hand: one process, no launcher. Ctrl-C stops it as SIGTERM
// does (a checkpoint at that step, exit 3, an exact resume); a second Ctrl-C
// ends it at once. A run folder belongs to one job at a time: a second run
// into a held one exits 2 naming the holder, and the lock a killed job left
// is taken over at once (its process not yet reaped), so the requeued run
// resumes.
#include <gtest/gtest.h>
#include <unistd.h>

#include "common/temp_dir.h"
#include "train/job_control.h"

namespace moelab::testing {
namespace {

class OneRankJob : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = dir_.str();
    write_tiny_moe_job(root_, "[checkpoint]\ninterval = 2\nkeep = 100\n");
  }
  // `hooks`: the test entry point's options (util/test_hooks.h).
  std::string train(const std::string& run, int64_t steps, const std::string& extra = "",
                    const std::string& log = "", const std::string& hooks = "") const {
    const std::string binary =
        hooks.empty() ? std::string(MOELAB_BINARY) : std::string(MOELAB_TEST_HOOKS) + " " + hooks;
    return binary + " train " + (root_ / "run.toml").string() +
           // A constant rate: a run stopped early continues as one of any length would.
           " --set parallel.ep=1 --set optim.schedule=constant --set train.max_steps=" +
           std::to_string(steps) + " --set eval.interval=0 --out " + (root_ / run).string() + " " +
           extra + " >> " + (root_ / ((log.empty() ? run : log) + ".log")).string() + " 2>&1";
  }
  std::string log(const std::string& name) const { return read_text(root_ / (name + ".log")); }
  // A run of many steps, started and stepping.
  pid_t started(const std::string& run, int lines = 3, const std::string& hooks = "") {
    const pid_t job = spawn(train(run, 1000000, "", "", hooks));
    EXPECT_TRUE(wait_for_lines(root_ / run / "metrics.jsonl", lines, job)) << log(run);
    return job;
  }

  TempDir dir_;
  fs::path root_;
};

TEST_F(OneRankJob, CtrlCStopsWithACheckpointAndASecondEndsItAtOnce) {
  const pid_t job = started("interrupted");
  ASSERT_EQ(kill(job, SIGINT), 0);
  double seconds = 0;
  auto status = wait_exit(job, std::chrono::seconds(60), &seconds);
  ASSERT_TRUE(status) << log("interrupted");
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 3) << log("interrupted");
  const int64_t stopped_at = loss_log(root_ / "interrupted").back().first;
  EXPECT_NE(log("interrupted").find("checkpoint saved at step " + std::to_string(stopped_at)),
            std::string::npos)
      << log("interrupted");
  // It continues from there, the uninterrupted curve bitwise.
  const std::string before = (root_ / "before.jsonl").string();
  fs::copy_file(root_ / "interrupted" / "metrics.jsonl", before);
  const int64_t steps = stopped_at + 2;
  ASSERT_EQ(std::system(train("interrupted", steps, "--resume auto", "resumed").c_str()), 0)
      << log("resumed");
  expect_resumed_from(root_ / "interrupted", log("resumed"), stopped_at, before);
  ASSERT_EQ(std::system(train("full", steps).c_str()), 0) << log("full");
  EXPECT_EQ(loss_log(root_ / "interrupted"), loss_log(root_ / "full"));

  // Steps of 3 s (the test hook), so the second press comes in the middle of one.
  const pid_t twice = started("twice", 1, "--hook-slow-rank=0:3000");
  ASSERT_EQ(kill(twice, SIGINT), 0);
  // A person's second press, after the first was taken (signals do not queue).
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ASSERT_EQ(kill(twice, SIGINT), 0);
  status = wait_exit(twice, std::chrono::seconds(2), &seconds);
  ASSERT_TRUE(status) << log("twice");
  EXPECT_TRUE(WIFSIGNALED(*status) && WTERMSIG(*status) == SIGINT) << log("twice");
  EXPECT_EQ(log("twice").find("stop signal"), std::string::npos) << log("twice");
}

TEST_F(OneRankJob, ARunFolderBelongsToOneJobAndADeadJobsLockIsTakenOver) {
  const pid_t holder = started("held");
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  EXPECT_EQ(WEXITSTATUS(std::system(train("held", 4, "", "second").c_str())), 2) << log("second");
  EXPECT_NE(log("second").find("in use by another job (host " + std::string(host) + ", pid " +
                               std::to_string(holder) + ")"),
            std::string::npos)
      << log("second");
  ASSERT_EQ(kill(holder, SIGKILL), 0);  // as a node failure or scancel -s KILL would
  // Not reaped yet, as when its launcher ended first: a zombie is as gone as
  // a reaped process, so the lock is taken at once, not after watching it.
  ASSERT_TRUE(becomes_zombie(holder));
  const int64_t newest = newest_checkpoint(root_ / "held");
  const std::string before = (root_ / "before.jsonl").string();
  fs::copy_file(root_ / "held" / "metrics.jsonl", before);
  ASSERT_EQ(std::system(train("held", newest + 2, "--resume auto", "requeued").c_str()), 0)
      << log("requeued");
  double seconds = 0;
  ASSERT_TRUE(wait_exit(holder, std::chrono::seconds(10), &seconds));
  EXPECT_NE(log("requeued").find("taking over the lock of a job that is gone"), std::string::npos)
      << log("requeued");
  EXPECT_EQ(log("requeued").find("watching for up to"), std::string::npos) << log("requeued");
  expect_resumed_from(root_ / "held", log("requeued"), newest, before);
  EXPECT_FALSE(fs::exists(root_ / "held" / "run.lock"));  // released at the end
}

}  // namespace
}  // namespace moelab::testing
