// Planning a study: runs, per-seed settings, matched widths, the manifest and
// the out_root guard against mixing two studies.
#include <gtest/gtest.h>

#include <filesystem>

#include "config/load.h"
#include "config/param_count.h"
#include "study/study_plan.h"
#include "study/study_spec.h"
#include "study_test_util.h"
#include "util/error.h"

namespace moelab {
namespace {

using testing::TempDir;
using testing::write_file;

class StudyPlanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    write_file(dir / "base.toml", testing::tiny_base_config("data/tiny"));
    write_file(dir / "study.toml", testing::tiny_study(dir / "out"));
  }
  StudyPlan plan() { return plan_study(load_study(dir / "study.toml")); }
  TempDir dir;
};

TEST_F(StudyPlanTest, OneRunPerVariantAndSeed) {
  const StudyPlan p = plan();
  ASSERT_EQ(p.runs.size(), 6u);
  EXPECT_EQ(p.runs[3].variant, "dense_active");
  EXPECT_EQ(p.runs[3].seed, 1);
  EXPECT_EQ(p.runs[3].dir, dir / "out/dense_active/seed1");
  EXPECT_EQ(p.runs[3].config, dir / "out/dense_active/seed1/config.toml");
  EXPECT_EQ(p.runs[3].cfg.train.seed, 1);
  EXPECT_EQ(p.runs[3].cfg.train.out_dir, p.runs[3].dir);
  // A relative data.dir is anchored at the working directory, where `moelab
  // train` would have read it, since the run config lives elsewhere.
  EXPECT_EQ(p.runs[0].cfg.data.dir, (std::filesystem::current_path() / "data/tiny").string());
  EXPECT_TRUE(p.runs[0].cfg.moe.enabled);
  EXPECT_EQ(p.runs[0].cfg.moe.num_experts, 4);
  EXPECT_EQ(p.variants[0].tokens, 10 * 4 * 32);  // max_steps * batch_seqs * seq_len
}

TEST_F(StudyPlanTest, MatchedVariantsUseMatchDense) {
  const StudyPlan p = plan();
  const Config& moe = p.runs[0].cfg;
  for (const auto& [index, target] : {std::pair<int, std::string>{1, "active"}, {2, "total"}}) {
    const PlannedVariant& v = p.variants[index];
    ASSERT_TRUE(v.match) << v.name;
    const MatchResult expected = match_dense(moe, target, "d_ff");
    EXPECT_FALSE(v.moe);
    EXPECT_EQ(v.match->target_params, expected.target);
    EXPECT_EQ(v.match->dense_total, expected.dense_total);
    EXPECT_DOUBLE_EQ(v.match->mismatch, expected.mismatch);
    EXPECT_EQ(v.total_params, expected.dense_total);
    EXPECT_EQ(p.runs[2 * index].cfg.model.d_ff, expected.dense.model.d_ff);
  }
  EXPECT_EQ(p.variants[0].total_params, count_params(moe).total);
  EXPECT_EQ(p.variants[0].active_params, count_params(moe).active);
  ASSERT_EQ(p.pairs.size(), 2u);
  EXPECT_EQ(p.pairs[0].label(), "dense_active - moe");
  EXPECT_EQ(p.pairs[1].label(), "dense_total - moe");
}

// study.compare adds pairs of any two variants (a stage's two children) after
// the matched ones; the runs and so the hash stay the same.
TEST_F(StudyPlanTest, ComparedPairsFollowTheMatchedOnes) {
  const std::string hash = plan().hash;
  write_file(dir / "study.toml",
             testing::tiny_study(dir / "out", "[0, 1]",
                                 "compare = [[\"moe\", \"dense_total\"], [\"dense_active\", "
                                 "\"dense_total\"]]\n"));
  const StudyPlan p = plan();
  ASSERT_EQ(p.pairs.size(), 4u);
  EXPECT_EQ(p.pairs[2].label(), "moe - dense_total");
  EXPECT_EQ(p.pairs[3].label(), "dense_active - dense_total");
  EXPECT_EQ(p.hash, hash);
}

TEST_F(StudyPlanTest, MatchedDenseUnderExpertParallelismIsDataParallel) {
  std::string text = testing::tiny_study(dir / "out", "[0]", "ranks = 2\n");
  text.replace(text.find("\"moe.d_expert\" = 32"), 19,
               "\"moe.d_expert\" = 32, \"parallel.ep\" = 2");
  write_file(dir / "study.toml", text);
  const StudyPlan p = plan();
  ASSERT_EQ(p.runs.size(), 3u);
  EXPECT_EQ(p.runs[0].cfg.parallel.ep, 2);
  for (int i : {1, 2}) {
    EXPECT_FALSE(p.runs[i].cfg.moe.enabled) << p.runs[i].variant;
    EXPECT_EQ(p.runs[i].cfg.parallel.ep, 1) << p.runs[i].variant;
  }
  // The match counts the same parameters as without expert parallelism.
  write_file(dir / "study.toml", testing::tiny_study(dir / "out", "[0]", "ranks = 2\n"));
  EXPECT_EQ(plan().variants[1].total_params, p.variants[1].total_params);
}

TEST_F(StudyPlanTest, ComputeBudgetSetsEachVariantsSteps) {
  std::string text = testing::tiny_study(dir / "out");
  text.replace(text.find("\"train.max_steps\" = 10"), 22, "\"train.compute_budget\" = 2e9");
  write_file(dir / "study.toml", text);
  const StudyPlan p = plan();
  for (size_t v = 0; v < 3; ++v) {
    const Config& cfg = p.runs[2 * v].cfg;
    const int64_t steps = static_cast<int64_t>(2e9 / (p.variants[v].flops_per_token * 4 * 32));
    EXPECT_EQ(cfg.train.max_steps, steps) << p.variants[v].name;
    EXPECT_EQ(p.variants[v].tokens, steps * 4 * 32) << p.variants[v].name;
  }
  // The total-matched dense model costs more per token than the MoE.
  EXPECT_LT(p.runs[4].cfg.train.max_steps, p.runs[0].cfg.train.max_steps);
}

TEST_F(StudyPlanTest, MoeMatchedToADenseTotalAtAnActivationRate) {
  write_file(dir / "study.toml",
             "[study]\nname = \"rates\"\nbase = \"base.toml\"\nseeds = [0]\nout_root = \"" +
                 (dir / "out") +
                 "\"\n\n[[variant]]\nname = \"dense\"\nset = { \"model.d_ff\" = 256 }\n\n"
                 "[[variant]]\nname = \"top1of8\"\nmatch = { variant = \"dense\", target = "
                 "\"total\", activation_rate = 0.125, experts = 8 }\n");
  const StudyPlan p = plan();
  ASSERT_EQ(p.variants.size(), 2u);
  EXPECT_TRUE(p.variants[1].moe);
  EXPECT_EQ(p.runs[1].cfg.moe.num_experts, 8);
  EXPECT_EQ(p.runs[1].cfg.moe.top_k, 1);
  ASSERT_TRUE(p.variants[1].match);
  EXPECT_EQ(p.variants[1].match->knob, "d_expert");
  EXPECT_EQ(p.variants[1].match->target_params, p.variants[0].total_params);
  EXPECT_LT(std::abs(p.variants[1].match->mismatch), 0.05);
  EXPECT_LT(p.variants[1].active_params, p.variants[0].active_params);
}

// Every study shipped in configs/studies plans (their base configs sit beside them).
TEST(ShippedStudies, EveryStudyFilePlans) {
  int planned = 0;
  for (const auto& entry :
       std::filesystem::directory_iterator(MOELAB_SOURCE_DIR "/configs/studies")) {
    const std::string path = entry.path().string();
    if (entry.path().extension() != ".toml" || path.find("-base.toml") != std::string::npos) {
      continue;
    }
    EXPECT_NO_THROW(plan_study(load_study(path))) << path;
    ++planned;
  }
  EXPECT_GE(planned, 5);
}

TEST_F(StudyPlanTest, MatchingADenseVariantFails) {
  std::string text = testing::tiny_study(dir / "out");
  text.replace(text.find("variant = \"moe\", target = \"total\""), 15,
               "variant = \"dense_active\"");
  write_file(dir / "study.toml", text);
  try {
    plan();
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("'dense_total' matches 'dense_active', which is a dense"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(StudyPlanTest, ConfigErrorsNameTheStudyPlace) {
  std::string text = testing::tiny_study(dir / "out");
  text.replace(text.find("\"moe.top_k\" = 2"), 15, "\"moe.top_k\" = 8");
  write_file(dir / "study.toml", text);
  try {
    plan();
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("moe.top_k"), std::string::npos) << e.what();
  }
}

TEST_F(StudyPlanTest, ManifestRoundTrips) {
  const StudyPlan p = plan();
  prepare_out_root(p);
  const StudyPlan m = read_study_manifest(dir / "out");
  EXPECT_EQ(m.name, p.name);
  EXPECT_EQ(m.hash, p.hash);
  EXPECT_EQ(m.seeds, p.seeds);
  ASSERT_EQ(m.runs.size(), p.runs.size());
  EXPECT_EQ(m.runs[5].dir, p.runs[5].dir);
  ASSERT_EQ(m.variants.size(), 3u);
  ASSERT_TRUE(m.variants[2].match);
  EXPECT_EQ(m.variants[2].match->dense_total, p.variants[2].match->dense_total);
  EXPECT_EQ(m.pairs.size(), 2u);
}

TEST_F(StudyPlanTest, OutRootHoldingADifferentStudyIsRefused) {
  prepare_out_root(plan());
  EXPECT_NO_THROW(prepare_out_root(plan()));  // the same study again is fine
  write_file(dir / "study.toml", testing::tiny_study(dir / "out", "[0, 1, 2]"));
  try {
    check_out_root(plan());
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("already holds a different study"), std::string::npos)
        << e.what();
  }
}

TEST_F(StudyPlanTest, RanksMustSplitTheBatch) {
  write_file(dir / "study.toml", testing::tiny_study(dir / "out", "[0]", "ranks = 3\n"));
  try {
    plan();
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("study.ranks = 3"), std::string::npos) << e.what();
  }
}

// A study without staged variants hashes as it did before staging existed, so
// an existing out_root keeps accepting its study: the value is the hash the
// code before staging computed for this study (commit 9f02538: 1c9c5f5724342629),
// since moved by the config keys added after it (model.attention and MLA's
// widths, train.mtp_depth and train.mtp_loss_weight), as every key added moves
// every resolved config's text: update it with a new key, never for anything else.
TEST(StudyHash, AStudyWithoutStagesHashesAsBeforeStaging) {
  TempDir dir;
  write_file(dir / "base.toml", testing::tiny_base_config("/nonexistent/moelab-hash/data"));
  write_file(dir / "study.toml", testing::tiny_study("/nonexistent/moelab-hash/out"));
  EXPECT_EQ(plan_study(load_study(dir / "study.toml")).hash, "129b6f0075c509f0");
}

}  // namespace
}  // namespace moelab
