// The local launcher against a stand-in `moelab` (a shell script that writes
// what a finished run writes), so scheduling, skipping, failure handling and
// the command line are tested without training anything.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>

#include "config/load.h"
#include "study/local_launcher.h"
#include "study/report.h"
#include "study/study_plan.h"
#include "study/study_spec.h"
#include "study_test_util.h"

namespace moelab {
namespace {

using testing::read_file;
using testing::TempDir;
using testing::write_file;

// Appends its arguments and OMP_NUM_THREADS to calls.log; fails for a run
// folder holding FAIL; otherwise writes val.csv and DONE like `moelab train`.
const char* kFakeMoelab = R"sh(#!/bin/bash
dir=$(dirname "$2")
echo "$* threads=$OMP_NUM_THREADS" >> "$(dirname "$(dirname "$dir")")/calls.log"
[[ -f $dir/FAIL ]] && {
  echo "boom";
  exit 3;
}
seed=$(sed -n 's/^seed = //p' "$2")
printf 'step,tokens,val_loss,best_val_loss\n5,640,%s,%s\n' "4.$seed" "4.$seed" > "$dir/val.csv"
printf '{"steps": 10, "tokens": 1280, "best_val_loss": 4.%s, "final_val_loss": 4.%s, "nonfinite_steps": 0, "wall_seconds": 1.5}\n' "$seed" "$seed" > "$dir/DONE"
)sh";

class LocalLauncherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    write_file(dir / "base.toml", testing::tiny_base_config(dir / "data"));
    write_file(dir / "study.toml", testing::tiny_study(dir / "out", "[0, 1, 2]", "threads = 3\n"));
    write_file(fake, kFakeMoelab);
    chmod(fake.c_str(), 0755);
    plan = plan_study(load_study(dir / "study.toml"));
    prepare_out_root(plan);
  }
  size_t calls() const {
    const std::string log = read_file(dir / "out/calls.log");
    return std::count(log.begin(), log.end(), '\n');
  }

  TempDir dir;
  const std::string fake = dir / "fake_moelab";
  StudyPlan plan;
};

TEST_F(LocalLauncherTest, RunsEveryRunThenSkipsFinishedOnes) {
  const auto outcomes = run_study_locally(plan, 2, fake);
  ASSERT_EQ(outcomes.size(), 9u);
  for (const auto& o : outcomes) EXPECT_EQ(o.status, LocalRunOutcome::Status::kFinished);
  EXPECT_EQ(calls(), 9u);
  const std::string log = read_file(dir / "out/calls.log");
  EXPECT_NE(log.find("train " + (dir / "out/moe/seed1/config.toml") + " --resume auto threads=3"),
            std::string::npos)
      << log;
  for (const auto& o : run_study_locally(plan, 2, fake)) {
    EXPECT_EQ(o.status, LocalRunOutcome::Status::kSkipped);
  }
  EXPECT_EQ(calls(), 9u);  // nothing ran again
}

TEST_F(LocalLauncherTest, KeepsGoingAfterAFailureAndReportsExcludesIt) {
  write_file(dir / "out/dense_active/seed1/FAIL", "");
  const auto outcomes = run_study_locally(plan, 1, fake);
  size_t failed = 0;
  for (const auto& o : outcomes) {
    if (o.status != LocalRunOutcome::Status::kFailed) continue;
    ++failed;
    EXPECT_EQ(o.variant, "dense_active");
    EXPECT_EQ(o.seed, 1);
    EXPECT_NE(o.detail.find("exit code 3"), std::string::npos) << o.detail;
  }
  EXPECT_EQ(failed, 1u);
  EXPECT_EQ(calls(), 9u);
  EXPECT_NE(read_file(dir / "out/dense_active/seed1/train.log").find("boom"), std::string::npos);

  const StudyReport report = build_report(plan);
  EXPECT_EQ(report.missing(), 1u);
  EXPECT_EQ(report.variants[1].best_val_loss.n, 2u);  // dense_active: seeds 0 and 2
  EXPECT_NEAR(report.variants[1].best_val_loss.mean, 4.1, 1e-12);
  EXPECT_EQ(report.pairs[0].seeds, (std::vector<int64_t>{0, 2}));
}

TEST_F(LocalLauncherTest, RunConfigsAreTheResolvedConfigs) {
  for (const auto& run : plan.runs) {
    const Config written = load_config(run.config);
    EXPECT_EQ(to_toml(written), to_toml(run.cfg));
    EXPECT_EQ(written.train.seed, run.seed);
    EXPECT_EQ(written.train.out_dir, run.dir);
    EXPECT_EQ(written.train.threads, 3);
  }
}

}  // namespace
}  // namespace moelab
