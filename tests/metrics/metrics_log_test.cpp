#include "metrics/metrics_log.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

#include "common/temp_dir.h"
#include "util/error.h"

namespace moelab {
namespace {

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void log_val_steps(ValLog& log, std::initializer_list<int64_t> steps) {
  for (int64_t step : steps) log.write(step, step * 64, {10.0 / static_cast<double>(step)});
}

TEST(MetricsLog, WritesOneFlushedJsonObjectPerLine) {
  testing::TempDir run;
  MetricsLog log(run.str());
  log.write({{"step", 1}, {"loss", 2.5}});
  // Flushed per line: readable while the log is still open.
  EXPECT_EQ(read_all(run / "metrics.jsonl"), "{\"loss\":2.5,\"step\":1}\n");
  log.write({{"step", 2}, {"loss", 2.25}});
  EXPECT_EQ(read_all(run / "metrics.jsonl"),
            "{\"loss\":2.5,\"step\":1}\n{\"loss\":2.25,\"step\":2}\n");
  EXPECT_THROW(log.write({{"loss", 1.0}}), std::invalid_argument);
}

TEST(MetricsLog, FreshRunReplacesAnOldFile) {
  testing::TempDir run;
  std::ofstream(run / "metrics.jsonl") << "{\"step\":9}\n";
  MetricsLog log(run.str());
  EXPECT_EQ(read_all(run / "metrics.jsonl"), "");
}

TEST(MetricsLog, ResumeDropsLinesAfterTheCheckpointAndATornLine) {
  testing::TempDir run;
  std::ofstream(run / "metrics.jsonl") << "{\"step\":1}\n{\"step\":2}\n{\"step\":3}\n{\"st";
  MetricsLog log(run.str(), /*resumed_step=*/2);
  log.write({{"step", 3}});
  EXPECT_EQ(read_all(run / "metrics.jsonl"), "{\"step\":1}\n{\"step\":2}\n{\"step\":3}\n");
}

TEST(MetricsLog, UnreadableLineIsAnInputErrorNamingFileAndLine) {
  testing::TempDir run;
  std::ofstream(run / "metrics.jsonl") << "{\"step\":1}\nnot json\n";
  try {
    MetricsLog log(run.str(), 1);
    FAIL() << "garbage accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(run / "metrics.jsonl:2"), std::string::npos) << e.what();
  }
}

TEST(ValLog, WritesHeaderOnceAndTracksTheBest) {
  testing::TempDir run;
  ValLog log(run.str());
  EXPECT_DOUBLE_EQ(log.write(10, 640, {3.5}), 3.5);
  EXPECT_DOUBLE_EQ(log.write(20, 1280, {3.25}), 3.25);
  EXPECT_DOUBLE_EQ(log.write(30, 1920, {3.375}), 3.25);
  EXPECT_EQ(read_all(run / "val.csv"),
            "step,tokens,val_loss,best_val_loss\n"
            "10,640,3.5,3.5\n20,1280,3.25,3.25\n30,1920,3.375,3.25\n");
}

TEST(ValLog, ResumedRunEndsWithTheUninterruptedFile) {
  testing::TempDir uninterrupted;
  {
    ValLog log(uninterrupted.str());
    log_val_steps(log, {1, 2, 3, 4, 5});
  }
  testing::TempDir resumed;
  {
    ValLog log(resumed.str());
    log_val_steps(log, {1, 2, 3, 4});  // crashed after step 4; checkpoint at step 2
  }
  {
    ValLog log(resumed.str(), /*resumed_step=*/2);
    EXPECT_DOUBLE_EQ(log.best_val_loss(), 5.0);
    log_val_steps(log, {3, 4, 5});
  }
  EXPECT_EQ(read_all(resumed / "val.csv"), read_all(uninterrupted / "val.csv"));
}

// Named sets add a column each after the four fixed ones; val_loss and the
// best are the first set's, and a resume keeps and checks the named header.
TEST(ValLog, NamedSetsGetAColumnEachAndResume) {
  testing::TempDir run;
  {
    ValLog log(run.str(), -1, {"web", "code"});
    EXPECT_DOUBLE_EQ(log.write(0, 0, {4.0, 5.5}), 4.0);
    EXPECT_DOUBLE_EQ(log.write(10, 640, {3.5, 2.0}), 3.5);
    log.write(20, 1280, {3.75, 1.5});
  }
  const std::string header = "step,tokens,val_loss,best_val_loss,val_loss/web,val_loss/code\n";
  EXPECT_EQ(read_all(run / "val.csv"),
            header + "0,0,4,4,4,5.5\n10,640,3.5,3.5,3.5,2\n20,1280,3.75,3.5,3.75,1.5\n");
  {
    ValLog log(run.str(), /*resumed_step=*/10, {"web", "code"});
    EXPECT_DOUBLE_EQ(log.best_val_loss(), 3.5);
  }
  EXPECT_EQ(read_all(run / "val.csv"), header + "0,0,4,4,4,5.5\n10,640,3.5,3.5,3.5,2\n");
  EXPECT_THROW(ValLog(run.str(), 10, {"web"}), InputError);  // another set list
  EXPECT_THROW(ValLog(run.str(), 10), InputError);
}

// Downstream task columns follow the sets' and stay empty where a task was not
// scored; a resume reads such rows and keeps the columns, refusing other ones.
TEST(ValLog, TaskColumnsMayBeEmptyAndResume) {
  testing::TempDir run;
  const std::vector<std::string> tasks = {"task/blimp/acc", "task/blimp/bpb"};
  {
    ValLog log(run.str(), -1, {}, tasks);
    log.write(0, 0, {4.0}, {0.5, 2.25});
    log.write(10, 640, {3.5}, {std::nullopt, std::nullopt});
    log.write(20, 1280, {3.25}, {0.625, 2.0});
  }
  const std::string header = "step,tokens,val_loss,best_val_loss,task/blimp/acc,task/blimp/bpb\n";
  EXPECT_EQ(read_all(run / "val.csv"),
            header + "0,0,4,4,0.5,2.25\n10,640,3.5,3.5,,\n20,1280,3.25,3.25,0.625,2\n");
  {
    ValLog log(run.str(), /*resumed_step=*/10, {}, tasks);
    EXPECT_DOUBLE_EQ(log.best_val_loss(), 3.5);
  }
  EXPECT_EQ(read_all(run / "val.csv"), header + "0,0,4,4,0.5,2.25\n10,640,3.5,3.5,,\n");
  EXPECT_THROW(ValLog(run.str(), 10, {}, {"task/blimp/acc"}), InputError);
  EXPECT_THROW(ValLog(run.str(), 10), InputError);
}

TEST(ValLog, WrongHeaderIsAnInputError) {
  testing::TempDir run;
  std::ofstream(run / "val.csv") << "step,loss\n1,2\n";
  EXPECT_THROW(ValLog(run.str(), 1), InputError);
}

}  // namespace
}  // namespace moelab
