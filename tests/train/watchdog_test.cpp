// The collective watchdog's account of who is not answering, from heartbeat
// files as the ranks' heartbeat threads write them, and its decisions.
#include "comm/watchdog.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iterator>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "common/temp_dir.h"

namespace moelab {
namespace {

int64_t unix_ms_ago(double seconds) {
  using namespace std::chrono;
  const auto now = duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
  return now - int64_t(seconds * 1000);
}

void heartbeat(const testing::TempDir& dir, int rank, const std::string& host, int64_t step,
               int64_t count, double age_s) {
  std::ofstream(dir / ("rank" + std::to_string(rank)))
      << host << " 4242 " << step << ' ' << count << ' ' << unix_ms_ago(age_s) << '\n';
}

// What rank 0, waiting in its 40th collective, says of its peers.
MissingRanks missing_for_rank0(const testing::TempDir& dir, int world_size) {
  WatchdogOptions options;
  options.world_size = world_size;
  return missing_ranks(read_heartbeats(dir.str(), world_size), options, 40, 5.0, unix_ms_ago(0));
}

TEST(Watchdog, NamesStaleRanksAndRanksThatNeverReachedTheCollective) {
  testing::TempDir dir;
  heartbeat(dir, 0, "h1", 7, 40, 0.1);  // ours: skipped
  heartbeat(dir, 1, "h1", 7, 40, 0.2);  // alive, in the same collective
  heartbeat(dir, 2, "h2", 7, 38, 0.3);  // alive, two collectives behind
  heartbeat(dir, 3, "h2", 6, 12, 30);   // frozen or dead
  const MissingRanks missing = missing_for_rank0(dir, 5);
  EXPECT_EQ(missing.text,
            "rank 2 (h2): has not reached it (at collective 38 of step 7); "
            "rank 3 (h2): no heartbeat for 30 s");
  EXPECT_FALSE(missing.excused);
}

TEST(Watchdog, EmptyWhenEveryRankIsAliveAndThere) {
  testing::TempDir dir;
  heartbeat(dir, 1, "h2", 3, 40, 0.0);
  EXPECT_EQ(missing_for_rank0(dir, 2).text, "");
}

TEST(Watchdog, ACollectiveThatNeverCompletesEndsTheProcessNamingIt) {
  testing::TempDir dir;
  EXPECT_EXIT(
      {
        spdlog::set_default_logger(spdlog::stderr_logger_st("watchdog"));  // what gtest reads
        WatchdogOptions options;
        options.timeout_s = 0.3;
        options.heartbeat_dir = dir.str();
        CollectiveWatchdog watchdog(options);
        CollectiveWatchdog::set_step(12);
        CollectiveScope scope("all_to_all_v");
        std::this_thread::sleep_for(std::chrono::seconds(10));
      },
      ::testing::ExitedWithCode(1),
      "all_to_all_v in step 12 has waited [0-9]+ s.*parallel.timeout_s = 0.3");
}

// A GPU communicator's stand-in: collectives enqueued and never completed,
// or a transport error; says on stderr when the watchdog aborts it.
class StuckCollectives : public AsyncCollectives {
 public:
  StuckCollectives(int64_t enqueued_ms, std::string error)
      : enqueued_ms_(enqueued_ms), error_(std::move(error)) {}
  Oldest oldest_unfinished() override { return {"all_to_all_v", enqueued_ms_}; }
  std::string async_error() override { return error_; }
  void abort() override { std::fprintf(stderr, "communicator aborted\n"); }

 private:
  int64_t enqueued_ms_;
  std::string error_;
};

void watch_until_the_end(StuckCollectives& source) {
  spdlog::set_default_logger(spdlog::stderr_logger_st("watchdog"));  // what gtest reads
  WatchdogOptions options;
  options.timeout_s = 0.3;
  CollectiveWatchdog watchdog(options);
  CollectiveWatchdog::set_step(5);
  watch_async_collectives(&source);
  std::this_thread::sleep_for(std::chrono::seconds(10));
}

TEST(Watchdog, AnEnqueuedCollectivePastTheTimeoutAbortsItsCommunicator) {
  StuckCollectives stuck(watchdog_clock_ms(), "");
  EXPECT_EXIT(watch_until_the_end(stuck), ::testing::ExitedWithCode(1),
              "communicator aborted.*all_to_all_v in step 5 has waited [0-9]+ s for its peers");
}

TEST(Watchdog, AnAsynchronousTransportErrorAbortsAtOnce) {
  StuckCollectives failed(watchdog_clock_ms() + 3600 * 1000, "remote process exited");
  EXPECT_EXIT(watch_until_the_end(failed), ::testing::ExitedWithCode(1),
              "communicator aborted.*all_to_all_v in step 5 failed: remote process exited");
}

TEST(Watchdog, ACollectiveThatCompletesInTimeIsLeftAlone) {
  WatchdogOptions options;
  options.timeout_s = 0.3;
  CollectiveWatchdog watchdog(options);
  for (int i = 0; i < 5; ++i) {
    CollectiveScope scope("barrier");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  SUCCEED();
}

Heartbeat beat_at(int64_t count, double age_s, WorkPhase phase = WorkPhase::kNone,
                  double in_phase_s = 0, double quiet_s = 0) {
  Heartbeat b;
  b.host = "h2";
  b.pid = 4242;
  b.step = 9;
  b.count = count;
  b.unix_ms = unix_ms_ago(age_s);
  b.phase = phase;
  b.phase_ms = int64_t(in_phase_s * 1000);
  b.progress = 77;
  b.progress_ms = int64_t(quiet_s * 1000);
  return b;
}

WatchdogOptions two_ranks() {
  WatchdogOptions o;
  o.timeout_s = 10;
  o.checkpoint_timeout_s = 100;
  o.phase_timeout_s = 50;
  o.world_size = 2;
  return o;
}

MissingRanks judged(const Heartbeat& peer) {
  return missing_ranks({std::nullopt, peer}, two_ranks(), 40, 5.0, unix_ms_ago(0));
}

// A peer that is writing a checkpoint and moving on is waited for, past
// parallel.timeout_s, up to the phase's bound; one that is frozen (no
// heartbeat), past the bound, or stuck without progress is not.
TEST(Watchdog, APeerBusyInALongPhaseExcusesTheWaitUntilItsBound) {
  const MissingRanks writing = judged(beat_at(38, 0.5, WorkPhase::kCheckpointWrite, 60, 1));
  EXPECT_TRUE(writing.excused);
  EXPECT_EQ(writing.text,
            "rank 1 (h2): has not reached it (in checkpoint_write for 60 s, "
            "progress 77 (2 s ago))");
  EXPECT_TRUE(judged(beat_at(38, 0.5, WorkPhase::kFirstStep, 40, 40)).excused);  // no progress kept
  EXPECT_FALSE(
      judged(beat_at(38, 0.5, WorkPhase::kCheckpointWrite, 120, 1)).excused);     // past 100 s
  EXPECT_FALSE(judged(beat_at(38, 0.5, WorkPhase::kEvaluation, 60, 1)).excused);  // past 50 s
  const MissingRanks stuck = judged(beat_at(38, 0.5, WorkPhase::kCheckpointRead, 30, 20));
  EXPECT_FALSE(stuck.excused);
  EXPECT_NE(stuck.text.find("no progress"), std::string::npos) << stuck.text;
  const MissingRanks frozen = judged(beat_at(38, 30, WorkPhase::kCheckpointWrite, 60, 1));
  EXPECT_FALSE(frozen.excused);
  EXPECT_NE(frozen.text.find("no heartbeat for 30 s"), std::string::npos) << frozen.text;
  EXPECT_FALSE(judged(beat_at(38, 0.5)).excused);  // behind, in no long phase
}

// Runs `body` in a child process; its exit status, or nullopt (the child
// killed) when it is still running after `limit`.
std::optional<int> exit_within(const std::function<void()>& body, std::chrono::seconds limit) {
  const pid_t child = fork();
  if (child == 0) {
    body();
    _exit(0);
  }
  const auto until = std::chrono::steady_clock::now() + limit;
  int status = 0;
  while (std::chrono::steady_clock::now() < until) {
    if (waitpid(child, &status, WNOHANG) == child) return status;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  kill(child, SIGKILL);
  waitpid(child, &status, 0);
  return std::nullopt;
}

// A heartbeat file system that hangs (here a FIFO without a reader where this
// rank's heartbeat is written) stalls the heartbeat thread only: the watchdog
// still ends the process on time when its peer is frozen.
TEST(Watchdog, AHungHeartbeatWriteCannotKeepItFromEndingTheJob) {
  testing::TempDir dir;
  ASSERT_EQ(mkfifo((dir / ".rank0.tmp").c_str(), 0600), 0);
  std::ofstream(dir / "rank1") << format_heartbeat(beat_at(3, 60));  // a frozen peer
  const auto status = exit_within(
      [&] {
        std::freopen((dir / "log").c_str(), "w", stderr);
        spdlog::set_default_logger(spdlog::stderr_logger_st("watchdog"));
        WatchdogOptions options;
        options.timeout_s = 1;
        options.heartbeat_dir = dir.str();
        options.world_size = 2;
        CollectiveWatchdog watchdog(options);
        CollectiveScope scope("all_reduce_sum");
        std::this_thread::sleep_for(std::chrono::seconds(30));
      },
      std::chrono::seconds(15));
  ASSERT_TRUE(status) << "the watchdog did not end the process";
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 1);
  std::ifstream log(dir / "log");
  const std::string text((std::istreambuf_iterator<char>(log)), {});
  EXPECT_NE(text.find("has not read its peers' heartbeats"), std::string::npos) << text;
}

}  // namespace
}  // namespace moelab
