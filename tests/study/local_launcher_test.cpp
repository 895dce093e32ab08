// The local launcher against a stand-in `moelab` (a shell script that writes
// what a finished run writes), so scheduling, skipping, failure handling and
// the command line are tested without training anything.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <sstream>

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
    EXPECT_NE(o.log_tail.find("| boom"), std::string::npos) << o.log_tail;
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

// Records (from its first rank) when each run starts and ends on which GPUs,
// taking long enough that the runs of one round overlap.
const char* kFakeGpuMoelab = R"sh(#!/bin/bash
log=$(dirname "$(dirname "$(dirname "$(dirname "$2")")")")/gpu.log
rank=${OMPI_COMM_WORLD_RANK:-0}
[[ $rank == 0 ]] && echo "start $CUDA_VISIBLE_DEVICES" >> "$log"
sleep 1
[[ $rank == 0 ]] && echo "end $CUDA_VISIBLE_DEVICES" >> "$log"
echo '{}' > "$(dirname "$2")/DONE"
)sh";

class GpuLocalLauncherTest : public ::testing::Test {
 protected:
  StudyPlan gpu_plan(int64_t ranks, int64_t runs_per_gpu, const std::string& seeds) {
    write_file(dir / "base.toml", testing::tiny_base_config(dir / "data"));
    std::string study =
        testing::tiny_study(dir / "out", seeds,
                            "ranks = " + std::to_string(ranks) +
                                "\nruns_per_gpu = " + std::to_string(runs_per_gpu) + "\n");
    study.replace(study.find("\"train.max_steps\" = 10"), 22,
                  "\"train.max_steps\" = 10\n\"train.device\" = \"cuda\"");
    write_file(dir / "study.toml", study);
    write_file(fake, kFakeGpuMoelab);
    chmod(fake.c_str(), 0755);
    StudyPlan plan = plan_study(load_study(dir / "study.toml"));
    prepare_out_root(plan);
    return plan;
  }
  // The most runs that were on each GPU group at once.
  std::map<std::string, int> peak_runs_per_group() const {
    std::map<std::string, int> now, peak;
    std::istringstream log(read_file(dir / "gpu.log"));
    for (std::string event, group; log >> event >> group;) {
      now[group] += event == "start" ? 1 : -1;
      peak[group] = std::max(peak[group], now[group]);
    }
    return peak;
  }

  TempDir dir;
  const std::string fake = dir / "fake_moelab";
};

TEST_F(GpuLocalLauncherTest, PacksRunsPerGpuOntoEachGpuTheyMaySee) {
  const StudyPlan plan = gpu_plan(1, 2, "[0, 1, 2]");
  // The GPUs of a Slurm job or a CUDA_VISIBLE_DEVICES list are not 0..n-1.
  const auto outcomes = run_study_locally(plan, 1, fake, {"3", "5"});
  for (const auto& o : outcomes) EXPECT_EQ(o.status, LocalRunOutcome::Status::kFinished);
  const auto peak = peak_runs_per_group();
  EXPECT_EQ(peak, (std::map<std::string, int>{{"3", 2}, {"5", 2}})) << read_file(dir / "gpu.log");
}

TEST_F(GpuLocalLauncherTest, MultiRankRunsTakeAGroupOfGpus) {
  const StudyPlan plan = gpu_plan(2, 1, "[0]");
  run_study_locally(plan, 4, fake, {"0", "1", "2"});  // the third GPU stays idle
  EXPECT_EQ(peak_runs_per_group(), (std::map<std::string, int>{{"0,1", 1}}))
      << read_file(dir / "gpu.log");
  EXPECT_THROW(
      {
        try {
          run_study_locally(plan, 1, fake, {"0"});
        } catch (const InputError& e) {
          EXPECT_NE(std::string(e.what()).find("study.ranks = 2 needs that many GPUs per run; "
                                               "this machine shows 1"),
                    std::string::npos)
              << e.what();
          throw;
        }
      },
      InputError);
}

}  // namespace
}  // namespace moelab
