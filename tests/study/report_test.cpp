// The report on fabricated run folders with hand-computed expectations: mean ±
// sample std per variant, gaps paired by seed, and missing or unfinished runs
// listed and excluded rather than averaged.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "study/report.h"
#include "study_test_util.h"
#include "util/error.h"

namespace moelab {
namespace {

using testing::read_file;
using testing::TempDir;
using testing::write_file;
using testing::write_run;

// A run's val.csv with named columns (validation sets, task metrics) after the
// loss ones: row i is step 5(i+1)'s tokens and losses (3.5, 3, 2.9) then
// values[i], comma-separated in the columns' order ("" where none was scored).
void write_val_csv(const std::string& run_dir, const std::string& columns,
                   const std::vector<std::string>& values) {
  const std::vector<std::string> losses = {"5,640,3.5,3.5", "10,1280,3,3", "15,1920,2.9,2.9"};
  std::string text = "step,tokens,val_loss,best_val_loss," + columns + "\n";
  for (size_t i = 0; i < values.size(); ++i) text += losses.at(i) + "," + values[i] + "\n";
  write_file(run_dir + "/val.csv", text);
}

class ReportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    plan.name = "fabricated";
    plan.out_root = dir.str();
    plan.seeds = {0, 1, 2};
    plan.pairs = {{"dense_active", "moe"}, {"dense_total", "moe"}};
    for (const char* v : {"moe", "dense_active", "dense_total"}) {
      plan.variants.push_back({v, std::string(v) == "moe", 1000, 500, 1280, std::nullopt, {}, 0.0});
      for (int64_t seed : plan.seeds) {
        PlannedRun r;
        r.variant = v;
        r.seed = seed;
        r.dir = dir / (std::string(v) + "/seed" + std::to_string(seed));
        plan.runs.push_back(r);
      }
    }
    write_run(dir / "moe/seed0", 3.0, true);
    write_run(dir / "moe/seed1", 3.2, true);  // seed 2 never started
    write_run(dir / "dense_active/seed0", 3.3, true);
    write_run(dir / "dense_active/seed1", 3.4, true);
    write_run(dir / "dense_active/seed2", 3.8, true);
    write_run(dir / "dense_total/seed0", 3.1, true);
    write_run(dir / "dense_total/seed1", 9.9, false);  // interrupted
    write_run(dir / "dense_total/seed2", 3.5, true);
  }
  TempDir dir;
  StudyPlan plan;
};

TEST_F(ReportTest, MeanStdPerVariantOverFinishedSeedsOnly) {
  const StudyReport r = build_report(plan);
  ASSERT_EQ(r.variants.size(), 3u);
  EXPECT_EQ(r.variants[0].best_val_loss.n, 2u);
  EXPECT_EQ(r.variants[0].planned_runs, 3u);
  EXPECT_NEAR(r.variants[0].best_val_loss.mean, 3.1, 1e-9);
  EXPECT_NEAR(*r.variants[0].best_val_loss.std, std::sqrt(0.02), 1e-9);
  EXPECT_NEAR(r.variants[1].best_val_loss.mean, 3.5, 1e-9);
  EXPECT_NEAR(*r.variants[1].best_val_loss.std, std::sqrt(0.07), 1e-9);
  EXPECT_NEAR(r.variants[1].final_val_loss.mean, 3.51, 1e-9);
  EXPECT_EQ(r.variants[2].best_val_loss.n, 2u);
  EXPECT_NEAR(r.variants[2].best_val_loss.mean, 3.3, 1e-9);  // 9.9 is not averaged in
  EXPECT_EQ(r.missing(), 2u);
}

TEST_F(ReportTest, GapsArePairedBySeed) {
  const StudyReport r = build_report(plan);
  ASSERT_EQ(r.pairs.size(), 2u);
  EXPECT_EQ(r.pairs[0].seeds, (std::vector<int64_t>{0, 1}));
  EXPECT_NEAR(r.pairs[0].best_gap.mean, 0.25, 1e-9);
  EXPECT_NEAR(*r.pairs[0].best_gap.std, std::sqrt(0.005), 1e-9);
  EXPECT_EQ(r.pairs[1].seeds, (std::vector<int64_t>{0}));
  EXPECT_NEAR(r.pairs[1].best_gap.mean, 0.1, 1e-9);
  EXPECT_FALSE(r.pairs[1].best_gap.std);  // one pair has no spread
}

TEST_F(ReportTest, TablesListExcludedRunsAndNPerVariant) {
  write_report_tables(build_report(plan), dir.str());
  const std::string md = read_file(dir / "summary.md");
  EXPECT_NE(md.find("| moe | 2/3 | 3.1000 ± 0.1414 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| dense_active | 3/3 | 3.5000 ± 0.2646 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| dense_active - moe | 2 | 0.2500 ± 0.0707 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| dense_total - moe | 1 | 0.1000 (n=1) |"), std::string::npos) << md;
  EXPECT_NE(md.find("- moe seed 2: missing (no run folder)"), std::string::npos) << md;
  EXPECT_NE(md.find("- dense_total seed 1: unfinished (no DONE file; 2 validation points"),
            std::string::npos)
      << md;

  const auto j = nlohmann::json::parse(read_file(dir / "summary.json"));
  EXPECT_EQ(j["variants"][0]["n"], 2);
  EXPECT_EQ(j["variants"][0]["planned_runs"], 3);
  EXPECT_EQ(j["excluded_runs"].size(), 2u);
  EXPECT_EQ(j["gaps"][0]["name"], "dense_active - moe");

  const std::string curves = read_file(dir / "curves.csv");
  EXPECT_EQ(curves.rfind("variant,seed,step,tokens,val_loss\nmoe,0,5,640,3.5\n", 0), 0u) << curves;
  EXPECT_EQ(curves.find("dense_total,1,"), std::string::npos);  // unfinished: excluded
  const std::string gaps = read_file(dir / "gap_curves.csv");
  EXPECT_NE(gaps.find("dense_active - moe,1,10,1280,0.19999"), std::string::npos) << gaps;
  EXPECT_EQ(gaps.find("dense_total - moe,1,"), std::string::npos);
}

// A run with named validation sets: curves.csv keeps the first set's val_loss,
// set_curves.csv holds every named set's curve.
TEST_F(ReportTest, NamedValidationSetsGetTheirOwnCurves) {
  write_val_csv(dir / "moe/seed0", "val_loss/web,val_loss/code", {"3.5,4.25", "3,4"});
  write_report_tables(build_report(plan), dir.str());
  const std::string curves = read_file(dir / "curves.csv");
  EXPECT_EQ(
      curves.rfind("variant,seed,step,tokens,val_loss\nmoe,0,5,640,3.5\nmoe,0,10,1280,3\n", 0), 0u)
      << curves;
  EXPECT_EQ(read_file(dir / "set_curves.csv"),
            "variant,seed,set,step,tokens,val_loss\nmoe,0,web,5,640,3.5\nmoe,0,code,5,640,4.25\n"
            "moe,0,web,10,1280,3\nmoe,0,code,10,1280,4\n");
  write_file(dir / "moe/seed0/val.csv",
             "step,tokens,val_loss,best_val_loss,val_loss/web\n5,640,3.5,3.5\n");
  EXPECT_NE(
      build_report(plan).runs[0].problem.find("val.csv:2: '5,640,3.5,3.5': expected 5 numbers"),
      std::string::npos)
      << build_report(plan).runs[0].problem;
}

// Runs that scored downstream tasks: each variant's final score (the last row
// where the task was scored) as mean ± std over finished seeds, the MoE and its
// matched dense side by side, and each pair's per-seed gap against its spread.
TEST_F(ReportTest, DownstreamTasksGetATableGapsAndCurves) {
  // Scored at steps 5 and 15, not at 10.
  const std::string tasks = "task/blimp/acc,task/blimp/bpb";
  write_val_csv(dir / "moe/seed0", tasks, {"0.5,2.5", ",", "0.6,2"});
  write_val_csv(dir / "moe/seed1", tasks, {"0.5,2.5", ",", "0.7,2"});
  write_val_csv(dir / "dense_active/seed0", tasks, {"0.5,2.5", ",", "0.5,2"});
  write_val_csv(dir / "dense_active/seed1", tasks, {"0.5,2.5", ",", "0.55,2"});
  write_val_csv(dir / "dense_active/seed2", tasks, {"0.5,2.5", ",", "0.6,2"});
  const StudyReport report = build_report(plan);
  const std::string md = summary_markdown(report);
  EXPECT_NE(md.find("| variant | blimp/acc | blimp/bpb |"), std::string::npos) << md;
  EXPECT_NE(md.find("| moe | 0.6500 ± 0.0707 | 2.0000 ± 0.0000 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| dense_active | 0.5500 ± 0.0500 |"), std::string::npos) << md;
  // Seeds 0 and 1: gaps -0.1 and -0.15, mean -0.125 beyond 2 standard errors (0.05).
  EXPECT_NE(md.find("| dense_active - moe | blimp/acc | 2 | -0.1250 ± 0.0354 | yes |"),
            std::string::npos)
      << md;
  write_report_tables(report, dir.str());
  const std::string curves = read_file(dir / "task_curves.csv");
  EXPECT_EQ(curves.rfind("variant,seed,task,step,tokens,value\nmoe,0,blimp/acc,5,640,0.5\n"
                         "moe,0,blimp/bpb,5,640,2.5\nmoe,0,blimp/acc,15,1920,0.6\n",
                         0),
            0u)
      << curves;
  const auto summary = nlohmann::json::parse(read_file(dir / "summary.json"));
  EXPECT_NEAR(summary["tasks"]["moe"]["blimp/acc"]["mean"].get<double>(), 0.65, 1e-12);
  EXPECT_EQ(summary["task_gaps"]["dense_active - moe"]["blimp/acc"]["n"], 2);
}

// Named validation sets (a multilingual study's languages): each variant's
// final loss per set as mean ± std over finished seeds, and each pair's
// per-seed gap per set against its spread.
TEST_F(ReportTest, NamedValidationSetsGetAFinalLossTableAndGapsPerSet) {
  const std::string sets = "val_loss/en,val_loss/ru";
  write_val_csv(dir / "moe/seed0", sets, {"3.5,9", "3,5"});
  write_val_csv(dir / "moe/seed1", sets, {"3.5,9", "3.2,5.5"});
  write_val_csv(dir / "dense_active/seed0", sets, {"3.5,9", "3.1,6"});
  write_val_csv(dir / "dense_active/seed1", sets, {"3.5,9", "3.2,6.1"});
  write_val_csv(dir / "dense_active/seed2", sets, {"3.5,9", "3.3,6.2"});
  const StudyReport report = build_report(plan);
  const std::string md = summary_markdown(report);
  EXPECT_NE(
      md.find("## Validation sets (final loss, mean ± std over seeds)\n\n| variant | en | ru |"),
      std::string::npos)
      << md;
  EXPECT_NE(md.find("| moe | 3.1000 ± 0.1414 | 5.2500 ± 0.3536 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| dense_active | 3.2000 ± 0.1000 | 6.1000 ± 0.1000 |"), std::string::npos)
      << md;
  // Seeds 0 and 1: en gaps 0.1 and 0 (within the spread), ru 1 and 0.6 (beyond).
  EXPECT_NE(md.find("| dense_active - moe | en | 2 | 0.0500 ± 0.0707 | no |"), std::string::npos)
      << md;
  EXPECT_NE(md.find("| dense_active - moe | ru | 2 | 0.8000 ± 0.2828 | yes |"), std::string::npos)
      << md;
  write_report_tables(report, dir.str());
  const auto summary = nlohmann::json::parse(read_file(dir / "summary.json"));
  EXPECT_NEAR(summary["sets"]["moe"]["ru"]["mean"].get<double>(), 5.25, 1e-12);
  EXPECT_NEAR(summary["set_gaps"]["dense_active - moe"]["ru"]["mean"].get<double>(), 0.8, 1e-12);
}

TEST_F(ReportTest, BrokenRunFilesAreExcludedWithTheReason) {
  write_file(dir / "moe/seed1/DONE", "not json");
  write_file(dir / "dense_active/seed2/val.csv", "step,loss\n");
  const StudyReport r = build_report(plan);
  EXPECT_EQ(r.missing(), 4u);
  EXPECT_NE(r.runs[1].problem.find("DONE: expected a JSON object"), std::string::npos)
      << r.runs[1].problem;
  EXPECT_NE(r.runs[5].problem.find("val.csv:1: expected the header"), std::string::npos)
      << r.runs[5].problem;
}

TEST_F(ReportTest, PlotsAreWrittenWhenMatplotlibExists) {
  if (std::system("python3 -c 'import matplotlib' 2>/dev/null") != 0 &&
      std::system("/usr/bin/python3 -c 'import matplotlib' 2>/dev/null") != 0) {
    GTEST_SKIP() << "no python3 with matplotlib";
  }
  // One run with named validation sets: set_curves.png too.
  write_val_csv(dir / "moe/seed0", "val_loss/web,val_loss/code", {"3.5,4.25", "3,4"});
  write_report_tables(build_report(plan), dir.str());
  ASSERT_TRUE(render_plots(dir.str(), MOELAB_SOURCE_DIR "/src/study/plot_study.py"));
  for (const char* png : {"curves.png", "gaps.png", "set_curves.png"}) {
    EXPECT_EQ(read_file(dir / png).substr(1, 3), "PNG") << png;
  }
}

}  // namespace
}  // namespace moelab
