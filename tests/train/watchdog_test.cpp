// The collective watchdog's account of who is not answering, from heartbeat
// files as the ranks' watchdog threads write them.
#include "comm/watchdog.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdio>
#include <fstream>
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

TEST(Watchdog, NamesStaleRanksAndRanksThatNeverReachedTheCollective) {
  testing::TempDir dir;
  heartbeat(dir, 0, "h1", 7, 40, 0.1);  // ours: skipped
  heartbeat(dir, 1, "h1", 7, 40, 0.2);  // alive, in the same collective
  heartbeat(dir, 2, "h2", 7, 38, 0.3);  // alive, two collectives behind
  heartbeat(dir, 3, "h2", 6, 12, 30);   // frozen or dead
  const std::string text = describe_missing_ranks(dir.str(), 5, 0, 40, 5.0);
  EXPECT_EQ(text,
            "rank 2 (h2): has not reached it (at collective 38 of step 7); "
            "rank 3 (h2): no heartbeat for 30 s");
}

TEST(Watchdog, EmptyWhenEveryRankIsAliveAndThere) {
  testing::TempDir dir;
  heartbeat(dir, 1, "h2", 3, 11, 0.0);
  EXPECT_EQ(describe_missing_ranks(dir.str(), 2, 0, 11, 5.0), "");
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

}  // namespace
}  // namespace moelab
