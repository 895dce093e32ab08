// Staged studies (a variant starting from another variant's runs, converted or
// not): parsing, planning (stages, inherited cost, starts), the local
// launcher's order and its handling of a failed parent (against a stand-in
// `moelab`), the report's cost with the parents' chain and the Slurm chain.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "config/load.h"
#include "study/local_launcher.h"
#include "study/report.h"
#include "study/slurm_scripts.h"
#include "study/stage_report.h"
#include "study/study_plan.h"
#include "study/study_spec.h"
#include "study_test_util.h"
#include "util/error.h"

namespace moelab {
// Named, not anonymous: a unity build compiles this file in one translation
// unit with other tests of its folder, whose helpers share these names.
namespace staged_study {

using testing::error_of;
using testing::read_file;
using testing::TempDir;
using testing::write_file;

std::string study_head(const std::string& out_root, const std::string& seeds = "[0]") {
  return "[study]\nname = \"staged\"\nbase = \"base.toml\"\nseeds = " + seeds + "\nout_root = \"" +
         out_root + "\"\nparallel_runs = 3\n\n";
}

// dense (10 steps); dense_ft from it (4 more); upcycled from it as an MoE of 4
// copies (6 steps); upcycled_more from upcycled (2 steps, listed before its
// parent); scratch, the same MoE from scratch.
std::string staged_variants() {
  return "[[variant]]\nname = \"dense\"\n\n"
         "[[variant]]\nname = \"dense_ft\"\nfrom = { variant = \"dense\" }\n"
         "set = { \"train.max_steps\" = 4 }\n\n"
         "[[variant]]\nname = \"upcycled_more\"\nfrom = { variant = \"upcycled\" }\n"
         "set = { \"train.max_steps\" = 2 }\n\n"
         "[[variant]]\nname = \"upcycled\"\nfrom = { variant = \"dense\", step = 10 }\n"
         "convert = { method = \"upcycle\", experts = 4, top_k = 2 }\n"
         "set = { \"train.max_steps\" = 6 }\n\n"
         "[[variant]]\nname = \"scratch\"\nset = { \"moe.enabled\" = true, \"moe.num_experts\" = "
         "4, \"moe.top_k\" = 2, \"moe.d_expert\" = 64 }\n";
}

std::string parse_error(const std::string& variants) {
  return error_of(study_head("/o") + "[[variant]]\nname = \"dense\"\n\n" + variants);
}

TEST(StagedSpec, FromAndConvertAreStrictlyParsed) {
  EXPECT_EQ(parse_error("[[variant]]\nname = \"c\"\nfrom = { variant = \"dense\", step = 3 }\n"
                        "convert = { method = \"dot\", experts = 8, top_k = 4, "
                        "calibration_steps = 5 }\n"),
            "");
  const std::string unknown =
      parse_error("[[variant]]\nname = \"c\"\nfrom = { varient = \"x\" }\n");
  EXPECT_NE(unknown.find("/studies/s.toml:13:10: unknown key 'varient' in variant 'c'.from; did "
                         "you mean 'variant'?"),
            std::string::npos)
      << unknown;
  const std::string missing =
      parse_error("[[variant]]\nname = \"c\"\nfrom = { variant = \"dens\" }\n");
  EXPECT_NE(missing.find("s.toml:13:8: variant 'c' starts from variant 'dens', which the study "
                         "does not define; did you mean 'dense'?"),
            std::string::npos)
      << missing;
  EXPECT_NE(parse_error("[[variant]]\nname = \"c\"\nfrom = { variant = \"c\" }\n")
                .find("variant 'c' cannot start from itself"),
            std::string::npos);
  EXPECT_NE(parse_error("[[variant]]\nname = \"c\"\nconvert = { method = \"dot\" }\n")
                .find("variant 'c'.convert converts the checkpoint `from` names, but the variant "
                      "has no from"),
            std::string::npos);
  EXPECT_NE(parse_error("[[variant]]\nname = \"c\"\nfrom = { variant = \"dense\" }\nmatch = { "
                        "variant = \"dense\" }\n")
                .find("has both from and match"),
            std::string::npos);
  const std::string wrong_method_key = parse_error(
      "[[variant]]\nname = \"c\"\nfrom = { variant = \"dense\" }\nconvert = { method = "
      "\"cluster\", experts = 8, top_k = 2, granularity = 2 }\n");
  EXPECT_NE(wrong_method_key.find("s.toml:14:57: unknown key 'granularity' in variant "
                                  "'c'.convert (method \"cluster\")"),
            std::string::npos)
      << wrong_method_key;
  EXPECT_NE(parse_error("[[variant]]\nname = \"c\"\nfrom = { variant = \"dense\" }\nconvert = { "
                        "method = \"upcycle\", experts = 8 }\n")
                .find("variant 'c'.convert.top_k is missing"),
            std::string::npos);
  EXPECT_NE(parse_error("[[variant]]\nname = \"c\"\nfrom = { variant = \"dense\" }\nconvert = { "
                        "method = \"merge\", experts = 8, top_k = 2 }\n")
                .find("variant 'c'.convert.method = \"merge\": expected one of \"upcycle\""),
            std::string::npos);
}

class StagedPlanTest : public ::testing::Test {
 protected:
  void SetUp() override { write_file(dir / "base.toml", testing::tiny_base_config(dir / "data")); }
  StudyPlan plan_of(const std::string& variants, const std::string& seeds = "[0]") {
    write_file(dir / "study.toml", study_head(dir / "out", seeds) + variants);
    return plan_study(load_study(dir / "study.toml"));
  }
  std::string plan_error(const std::string& variants) {
    try {
      plan_of(variants);
    } catch (const InputError& e) {
      return e.what();
    }
    return "";
  }
  TempDir dir;
};

TEST_F(StagedPlanTest, StagesAndTheTokensAndFlopsEachRunInherits) {
  const StudyPlan p = plan_of(staged_variants());
  const PlannedVariant& dense = planned_variant(p, "dense");
  const PlannedVariant& ft = planned_variant(p, "dense_ft");
  const PlannedVariant& up = planned_variant(p, "upcycled");
  const PlannedVariant& more = planned_variant(p, "upcycled_more");
  EXPECT_EQ(dense.stage, 0);
  EXPECT_EQ(ft.stage, 1);
  EXPECT_EQ(up.stage, 1);
  EXPECT_EQ(more.stage, 2);
  EXPECT_EQ(planned_variant(p, "scratch").stage, 0);
  const int64_t step_tokens = 4 * 32;  // batch_seqs x seq_len
  EXPECT_EQ(dense.tokens, 10 * step_tokens);
  EXPECT_EQ(ft.tokens, 4 * step_tokens);
  EXPECT_EQ(ft.inherited_tokens, 10 * step_tokens);
  EXPECT_DOUBLE_EQ(ft.inherited_flops, 10 * step_tokens * dense.flops_per_token);
  EXPECT_EQ(more.from_step, 6);
  EXPECT_EQ(more.inherited_tokens, (10 + 6) * step_tokens);
  EXPECT_DOUBLE_EQ(more.inherited_flops,
                   10 * step_tokens * dense.flops_per_token + 6 * step_tokens * up.flops_per_token);
  EXPECT_GT(up.flops_per_token, dense.flops_per_token);  // top-2 of copies: twice the FFN
  // The upcycled model is the scratch MoE, and what it inherits from dense is
  // its config besides the model and its own overrides.
  EXPECT_EQ(up.total_params, planned_variant(p, "scratch").total_params);
  EXPECT_EQ(up.convert, "upcycle");
  EXPECT_EQ(ft.convert, "");
}

TEST_F(StagedPlanTest, ARunStartsFromItsParentsCheckpointOrItsConvertedStart) {
  const StudyPlan p = plan_of(staged_variants(), "[0, 1]");
  for (const auto& run : p.runs) {
    const std::string seed = "seed" + std::to_string(run.seed);
    if (run.variant == "dense_ft") {
      EXPECT_EQ(run.cfg.train.init_from,
                dir / ("out/dense/" + seed + "/checkpoints/step_00000010"));
      EXPECT_TRUE(run.start_args.empty());
      EXPECT_EQ(run.cfg.train.max_steps, 4);
    } else if (run.variant == "upcycled") {
      EXPECT_EQ(run.cfg.train.init_from,
                dir / ("out/upcycled/" + seed + "/start/checkpoints/step_00000000"));
      EXPECT_EQ(run.start_args,
                (std::vector<std::string>{
                    "upcycle", dir / ("out/dense/" + seed + "/checkpoints/step_00000010"),
                    "--experts", "4", "--top-k", "2", "--seed", std::to_string(run.seed), "--out",
                    dir / ("out/upcycled/" + seed + "/start")}));
      EXPECT_TRUE(run.cfg.moe.enabled);
      EXPECT_EQ(run.cfg.moe.d_expert, 64);
    } else if (run.variant == "upcycled_more") {
      EXPECT_EQ(run.cfg.train.init_from,
                dir / ("out/upcycled/" + seed + "/checkpoints/step_00000006"));
    } else {
      EXPECT_EQ(run.cfg.train.init_from, "") << run.variant;
    }
  }
}

// A child trains on a mixture of its own: its `set` replaces the parent's list
// of sources (study B of results/fortunes-multilingual adds a language).
TEST_F(StagedPlanTest, AChildsSetCanReplaceItsParentsMixture) {
  const std::string data = dir / "data";
  const StudyPlan p = plan_of(
      "[[variant]]\nname = \"dense\"\nset = { \"train.max_steps\" = 10 }\n"
      "[[variant]]\nname = \"expanded\"\nfrom = { variant = \"dense\" }\n"
      "set = { \"data.dir\" = \"\", \"data.sources\" = [{ name = \"old\", dir = \"" +
      data + "\", weight = 3 }, { name = \"new\", dir = \"" + data + "\" }] }\n");
  for (const auto& run : p.runs) {
    if (run.variant == "dense") {
      EXPECT_TRUE(run.cfg.data.sources.empty());
      continue;
    }
    ASSERT_EQ(run.cfg.data.sources.size(), 2u);
    EXPECT_EQ(run.cfg.data.sources[0].name, "old");
    EXPECT_DOUBLE_EQ(run.cfg.data.sources[0].weight, 3.0);
    EXPECT_EQ(run.cfg.data.sources[1].name, "new");
    EXPECT_EQ(run.cfg.data.sources[1].dir, data);
  }
}

TEST_F(StagedPlanTest, AStepThatTheParentWillNotKeepIsRefused) {
  const std::string child = "[[variant]]\nname = \"dense\"\n\n[[variant]]\nname = \"c\"\n";
  const std::string beyond = plan_error(child + "from = { variant = \"dense\", step = 11 }\n");
  EXPECT_NE(beyond.find("study.toml:13:8: variant 'c'.from.step = 11 is beyond variant 'dense''s "
                        "train.max_steps = 10"),
            std::string::npos)
      << beyond;
  const std::string unsaved = plan_error(child + "from = { variant = \"dense\", step = 5 }\n");
  EXPECT_NE(unsaved.find("variant 'dense' will not keep a checkpoint there (checkpoint.interval = "
                         "0, checkpoint.keep = 2, train.max_steps = 10)"),
            std::string::npos)
      << unsaved;
  const std::string every5 =
      "[[variant]]\nname = \"dense\"\nset = { \"checkpoint.interval\" = 2 }\n\n[[variant]]\nname "
      "= \"c\"\n";
  EXPECT_EQ(plan_error(every5 + "from = { variant = \"dense\", step = 8 }\n"), "");
  EXPECT_NE(plan_error(every5 + "from = { variant = \"dense\", step = 6 }\n").find("will not keep"),
            std::string::npos);  // only the newest 2 (8 and 10) are kept
}

TEST_F(StagedPlanTest, ConvertingAnMoeAndCyclesAreRefused) {
  const std::string moe_parent = plan_error(
      "[[variant]]\nname = \"moe\"\nset = { \"moe.enabled\" = true, \"moe.num_experts\" = 4 "
      "}\n\n[[variant]]\nname = \"c\"\nfrom = { variant = \"moe\" }\nconvert = { method = "
      "\"random\", experts = 4, top_k = 2 }\n");
  EXPECT_NE(moe_parent.find("study.toml:15:11: variant 'c'.convert: method \"random\" makes "
                            "experts of a dense model's FFNs, but the parent is already an MoE"),
            std::string::npos)
      << moe_parent;
  EXPECT_NE(plan_error("[[variant]]\nname = \"d\"\n\n[[variant]]\nname = \"c\"\nfrom = { variant = "
                       "\"d\" }\nconvert = { method = \"random\", experts = 3, top_k = 2 }\n")
                .find("experts = 3 must divide d_ff = 64"),
            std::string::npos);
  const std::string cycle = plan_error(
      "[[variant]]\nname = \"a\"\nfrom = { variant = \"b\" }\n\n[[variant]]\nname = "
      "\"b\"\nfrom = { variant = \"a\" }\n");
  EXPECT_NE(cycle.find("depends on 'a': a cycle"), std::string::npos) << cycle;
  const std::string through_match = plan_error(
      "[[variant]]\nname = \"a\"\nmatch = { variant = \"b\" }\n\n[[variant]]\nname = "
      "\"b\"\nfrom = { variant = \"a\" }\n");
  EXPECT_NE(through_match.find("study.toml:10:9: variant 'a' depends, through from or match, on a "
                               "variant that depends on 'a': a cycle"),
            std::string::npos)
      << through_match;
}

// Logs "start <variant>/<seed>" and "end ..." (to $CALLS) around a 0.3 s run
// that fails where the run folder holds FAIL; `upcycle ... --out DIR` writes
// DIR's checkpoint folder and logs "upcycle <variant>/<seed>".
const char* kFakeMoelab = R"sh(#!/bin/bash
if [[ $1 == upcycle ]]; then
  out=${@: -1}
  mkdir -p "$out/checkpoints/step_00000000"
  run=$(dirname "$out")
  echo "upcycle ${run#$ROOT/}" >> "$CALLS"
  exit 0
fi
dir=$(dirname "$2")
echo "start ${dir#$ROOT/}" >> "$CALLS"
sleep 0.3
echo "end ${dir#$ROOT/}" >> "$CALLS"
[[ -f $dir/FAIL ]] && exit 3
printf 'step,tokens,val_loss,best_val_loss\n1,128,4.0,4.0\n' > "$dir/val.csv"
printf '{"steps": 1, "tokens": 128, "best_val_loss": 4.0, "final_val_loss": 4.0, "nonfinite_steps": 0, "wall_seconds": 1.0}\n' > "$dir/DONE"
)sh";

class StagedLauncherTest : public StagedPlanTest {
 protected:
  StudyPlan prepared(const std::string& seeds) {
    write_file(fake, kFakeMoelab);
    chmod(fake.c_str(), 0755);
    setenv("CALLS", (dir / "calls.log").c_str(), 1);
    setenv("ROOT", (dir / "out").c_str(), 1);
    StudyPlan p = plan_of(staged_variants(), seeds);
    prepare_out_root(p);
    return p;
  }
  std::vector<std::string> calls() const {
    std::vector<std::string> lines;
    std::istringstream in(read_file(dir / "calls.log"));
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
  }
  size_t at(const std::string& event) const {
    const auto lines = calls();
    const auto it = std::find(lines.begin(), lines.end(), event);
    EXPECT_NE(it, lines.end()) << event << " not in\n" << read_file(dir / "calls.log");
    return size_t(it - lines.begin());
  }
  const std::string fake = dir / "fake_moelab";
};

TEST_F(StagedLauncherTest, ChildrenStartWhenTheirParentsEndAndSiblingsRunSideBySide) {
  const StudyPlan p = prepared("[0]");
  for (const auto& o : run_study_locally(p, 3, fake))
    EXPECT_EQ(o.status, LocalRunOutcome::Status::kFinished) << o.variant << " " << o.detail;
  EXPECT_LT(at("end dense/seed0"), at("start dense_ft/seed0"));
  EXPECT_LT(at("end dense/seed0"), at("upcycle upcycled/seed0"));
  EXPECT_LT(at("upcycle upcycled/seed0"), at("start upcycled/seed0"));
  EXPECT_LT(at("end upcycled/seed0"), at("start upcycled_more/seed0"));
  // dense and scratch start at once; dense_ft and upcycled overlap too.
  EXPECT_LT(at("start scratch/seed0"), at("end dense/seed0"));
  EXPECT_LT(at("start dense_ft/seed0"), at("end upcycled/seed0"));
  EXPECT_LT(at("start upcycled/seed0"), at("end dense_ft/seed0"));
}

TEST_F(StagedLauncherTest, AFailedParentLeavesItsChildrenUnstartedAndReported) {
  const StudyPlan p = prepared("[0, 1]");
  write_file(dir / "out/dense/seed1/FAIL", "");
  std::map<std::string, LocalRunOutcome> by_run;
  for (const auto& o : run_study_locally(p, 2, fake))
    by_run[o.variant + "/" + std::to_string(o.seed)] = o;
  for (const char* run :
       {"dense/0", "dense_ft/0", "upcycled/0", "upcycled_more/0", "scratch/0", "scratch/1"}) {
    EXPECT_EQ(by_run[run].status, LocalRunOutcome::Status::kFinished) << run;
  }
  EXPECT_EQ(by_run["dense/1"].status, LocalRunOutcome::Status::kFailed);
  for (const char* run : {"dense_ft/1", "upcycled/1"}) {
    EXPECT_EQ(by_run[run].status, LocalRunOutcome::Status::kNotStarted) << run;
    EXPECT_EQ(by_run[run].detail, "not started: it starts from dense seed 1, which failed");
  }
  EXPECT_EQ(by_run["upcycled_more/1"].status, LocalRunOutcome::Status::kNotStarted);
  EXPECT_EQ(by_run["upcycled_more/1"].detail,
            "not started: it starts from upcycled seed 1, which was not started");
  const std::string log = read_file(dir / "calls.log");
  EXPECT_EQ(log.find("upcycled/seed1"), std::string::npos) << log;
  EXPECT_EQ(log.find("dense_ft/seed1"), std::string::npos) << log;
}

TEST_F(StagedLauncherTest, ARerunSkipsFinishedRunsAndAWrittenStart) {
  const StudyPlan p = prepared("[0, 1]");
  std::filesystem::create_directories(dir / "out/upcycled/seed0/start/checkpoints/step_00000000");
  run_study_locally(p, 2, fake);
  const std::string log = read_file(dir / "calls.log");
  EXPECT_EQ(log.find("upcycle upcycled/seed0"), std::string::npos) << log;
  EXPECT_NE(log.find("start upcycled/seed0"), std::string::npos) << log;
  EXPECT_NE(log.find("upcycle upcycled/seed1"), std::string::npos) << log;
  std::filesystem::remove(dir / "calls.log");
  for (const auto& o : run_study_locally(p, 2, fake))
    EXPECT_EQ(o.status, LocalRunOutcome::Status::kSkipped);
  EXPECT_FALSE(std::filesystem::exists(dir / "calls.log"));
}

// Every run finished as planned: its steps, tokens = steps x 128, wall 2 s.
void write_planned_runs(const StudyPlan& p) {
  for (const auto& run : p.runs) {
    const int64_t steps = run.cfg.train.max_steps, tokens = steps * 128;
    write_file(run.dir + "/val.csv", "step,tokens,val_loss,best_val_loss\n" +
                                         std::to_string(steps) + "," + std::to_string(tokens) +
                                         ",4.0,4.0\n");
    write_file(run.dir + "/DONE", "{\"steps\": " + std::to_string(steps) +
                                      ", \"tokens\": " + std::to_string(tokens) +
                                      ", \"best_val_loss\": 4.0, \"final_val_loss\": 4.0, "
                                      "\"nonfinite_steps\": 0, \"wall_seconds\": 2.0}\n");
  }
}

TEST_F(StagedPlanTest, TheReportCountsAChildsCostWithItsParentsChain) {
  StudyPlan p = plan_of(staged_variants(), "[0, 1]");
  prepare_out_root(p);
  write_planned_runs(p);
  const StudyReport report = build_report(read_study_manifest(dir / "out"));
  for (const auto& run : report.runs) {
    const PlannedVariant& v = planned_variant(report.plan, run.variant);
    const auto own = run_cost(report, run, false);
    const auto total = run_cost(report, run, true);
    ASSERT_TRUE(own && total);
    EXPECT_DOUBLE_EQ(own->tokens, double(v.tokens));
    EXPECT_DOUBLE_EQ(total->tokens, double(v.tokens + v.inherited_tokens)) << run.variant;
    EXPECT_DOUBLE_EQ(total->flops, v.own_flops() + v.inherited_flops) << run.variant;
    EXPECT_DOUBLE_EQ(total->wall_seconds, 2.0 * (v.stage + 1)) << run.variant;
  }
  // upcycled_more: 2 steps of its own after upcycled's 6 after dense's 10.
  const RunResult& more = *find_run(report.runs, "upcycled_more", 1);
  EXPECT_DOUBLE_EQ(run_cost(report, more, true)->tokens, (2 + 6 + 10) * 128.0);
  const std::string md = summary_markdown(report);
  EXPECT_NE(md.find("| upcycled_more | 2 | upcycled step 6 | 4.0000 ± 0.0000 | 256 | 2304 |"),
            std::string::npos)
      << md;
  // Without its parent's record a child's total is unknown, not its own alone.
  std::filesystem::remove(dir / "out/upcycled/seed1/DONE");
  const StudyReport partial = build_report(read_study_manifest(dir / "out"));
  EXPECT_FALSE(run_cost(partial, *find_run(partial.runs, "upcycled_more", 1), true));
}

// Appends its arguments to $CALLS and answers a new job id (100, 101, ...).
const char* kFakeSbatch = R"sh(#!/bin/bash
echo "$*" >> "$CALLS"
echo $((100 + $(wc -l < "$CALLS") - 1))
)sh";

TEST_F(StagedPlanTest, SlurmArraysWaitForTheirParentsArrays) {
  const StudyPlan p = plan_of(staged_variants(), "[0, 1]");
  prepare_out_root(p);
  const auto scripts =
      write_slurm_scripts(p, SlurmSpec{}, MOELAB_SOURCE_DIR "/slurm", "/opt/moelab");
  std::vector<std::string> order;
  for (const auto& s : scripts) order.push_back(s.name);
  EXPECT_EQ(order, (std::vector<std::string>{"dense", "scratch", "dense_ft", "upcycled",
                                             "upcycled_more", "report"}));
  for (const auto& s : scripts) {
    EXPECT_EQ(std::system(("bash -n " + s.path).c_str()), 0) << s.path;
  }
  const std::string upcycled = read_file(dir / "out/slurm/upcycled.sbatch");
  EXPECT_NE(upcycled.find("'[[ -d " + (dir / "out/upcycled/seed0/start/checkpoints/step_00000000") +
                          " ]] || /opt/moelab upcycle " +
                          (dir / "out/dense/seed0/checkpoints/step_00000010")),
            std::string::npos)
      << upcycled;
  EXPECT_NE(read_file(dir / "out/slurm/dense.sbatch").find("starts=('' '')"), std::string::npos);

  write_file(dir / "bin/sbatch", kFakeSbatch);
  chmod((dir / "bin/sbatch").c_str(), 0755);
  setenv("CALLS", (dir / "sbatch.log").c_str(), 1);
  const std::string path = std::getenv("PATH");
  setenv("PATH", ((dir / "bin") + ":" + path).c_str(), 1);
  const auto ids = submit_slurm_scripts(scripts);
  setenv("PATH", path.c_str(), 1);
  EXPECT_EQ(ids, (std::vector<std::string>{"100", "101", "102", "103", "104", "105"}));
  std::vector<std::string> lines;
  std::istringstream in(read_file(dir / "sbatch.log"));
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 6u);
  const std::string slurm = dir / "out/slurm/";
  EXPECT_EQ(lines[0], "--parsable " + slurm + "dense.sbatch");
  EXPECT_EQ(lines[2], "--parsable --dependency=afterok:100 " + slurm + "dense_ft.sbatch");
  EXPECT_EQ(lines[3], "--parsable --dependency=afterok:100 " + slurm + "upcycled.sbatch");
  EXPECT_EQ(lines[4], "--parsable --dependency=afterok:103 " + slurm + "upcycled_more.sbatch");
  EXPECT_EQ(lines[5],
            "--parsable --dependency=afterok:100:101:102:103:104 " + slurm + "report.sbatch");
}

// srun without a cluster: runs the command after its options.
const char* kFakeSrun = R"sh(#!/bin/bash
while [[ $1 == --* ]]; do shift; done
exec "$@"
)sh";

// A converted child's array task writes its start, then trains; a requeued
// task whose start is written does not convert again.
TEST_F(StagedLauncherTest, AnArrayTaskWritesItsConvertedStartOnce) {
  const StudyPlan p = prepared("[0]");
  const auto scripts = write_slurm_scripts(p, SlurmSpec{}, MOELAB_SOURCE_DIR "/slurm", fake);
  write_file(dir / "bin/srun", kFakeSrun);
  chmod((dir / "bin/srun").c_str(), 0755);
  const std::string task = "PATH=" + (dir / "bin") + ":$PATH SLURM_JOB_ID=1 SLURM_ARRAY_JOB_ID=1 " +
                           "SLURM_ARRAY_TASK_ID=0 bash " + (dir / "out/slurm/upcycled.sbatch") +
                           " > " + (dir / "task.out") + " 2>&1";
  ASSERT_EQ(std::system(task.c_str()), 0) << read_file(dir / "task.out");
  EXPECT_LT(at("upcycle upcycled/seed0"), at("start upcycled/seed0"));
  ASSERT_TRUE(std::filesystem::exists(dir / "out/upcycled/seed0/DONE"));
  std::filesystem::remove(dir / "out/upcycled/seed0/DONE");
  std::filesystem::remove(dir / "calls.log");
  ASSERT_EQ(std::system(task.c_str()), 0) << read_file(dir / "task.out");
  EXPECT_EQ(calls(), (std::vector<std::string>{"start upcycled/seed0", "end upcycled/seed0"}));
}

// results/tinystories-conversion/study.toml, reproduce.sh's experiment as a
// staged study, plans: every conversion and the fine-tune start from dense's
// step 300, and the upcycled MoE is the scratch one.
TEST(StagedResults, TheTinyStoriesConversionStudyPlans) {
  const StudyPlan p =
      plan_study(load_study(MOELAB_SOURCE_DIR "/results/tinystories-conversion/study.toml"));
  ASSERT_EQ(p.runs.size(), 14u);
  const PlannedVariant& dense = planned_variant(p, "dense");
  EXPECT_EQ(dense.stage, 0);
  EXPECT_EQ(dense.tokens, 300 * 16 * 256);
  for (const char* name : {"dense-ft", "random-ft", "cluster-ft", "dot-ft", "upcycle"}) {
    const PlannedVariant& v = planned_variant(p, name);
    EXPECT_EQ(v.stage, 1) << name;
    EXPECT_EQ(v.parent, "dense") << name;
    EXPECT_EQ(v.from_step, 300) << name;
    EXPECT_EQ(v.inherited_tokens, dense.tokens) << name;
  }
  EXPECT_EQ(planned_variant(p, "dot-ft").convert, "dot");
  EXPECT_EQ(planned_variant(p, "dot-ft").tokens, 100 * 16 * 256);
  EXPECT_EQ(planned_variant(p, "upcycle").total_params, planned_variant(p, "scratch").total_params);
  EXPECT_EQ(planned_variant(p, "upcycle").active_params,
            planned_variant(p, "scratch").active_params);
  for (const auto& run : p.runs) {
    if (run.variant == "dot-ft") {
      EXPECT_NE(std::find(run.start_args.begin(), run.start_args.end(), "--calibration-steps"),
                run.start_args.end());
    }
  }
}

}  // namespace staged_study
}  // namespace moelab
