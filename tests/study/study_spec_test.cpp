// The study file: what a good one resolves to, and the bad inputs that must
// fail before anything runs, each with a message naming the place and the fix.
#include <gtest/gtest.h>

#include "study/study_spec.h"
#include "study_test_util.h"
#include "util/error.h"

namespace moelab {
namespace {

using testing::error_of;
using testing::tiny_study;

TEST(StudySpec, ParsesVariantsSeedsAndPaths) {
  const StudySpec s = parse_study(
      tiny_study("/runs/tiny", "[3, 1, 2]", "ranks = 2\nthreads = 3\nparallel_runs = 2\n") +
          "[slurm]\npartition = \"gpu\"\nlauncher = \"mpirun\"\nextra = [\"--qos=low\"]\n",
      "/studies/s.toml");
  EXPECT_EQ(s.name, "tiny");
  EXPECT_EQ(s.base, "/studies/base.toml");  // relative to the study file
  EXPECT_EQ(s.seeds, (std::vector<int64_t>{3, 1, 2}));
  EXPECT_EQ(s.out_root, "/runs/tiny");
  EXPECT_EQ(s.ranks, 2);
  EXPECT_EQ(s.threads, 3);
  EXPECT_EQ(s.parallel_runs, 2);
  ASSERT_EQ(s.set.size(), 1u);
  EXPECT_EQ(s.set[0].assignment, "train.max_steps=10");
  EXPECT_EQ(s.set[0].origin, "/studies/s.toml:11:1");
  ASSERT_EQ(s.variants.size(), 3u);
  EXPECT_EQ(s.variants[0].name, "moe");
  EXPECT_EQ(s.variants[0].set.size(), 4u);
  EXPECT_EQ(s.variants[0].set[0].assignment, "moe.enabled=true");
  EXPECT_FALSE(s.variants[0].match);
  ASSERT_TRUE(s.variants[2].match);
  EXPECT_EQ(s.variants[2].match->variant, "moe");
  EXPECT_EQ(s.variants[2].match->target, "total");
  EXPECT_EQ(s.variants[2].match->knob, "d_ff");
  EXPECT_EQ(s.slurm.partition, "gpu");
  EXPECT_EQ(s.slurm.launcher, "mpirun");
  EXPECT_EQ(s.slurm.extra, std::vector<std::string>{"--qos=low"});
}

TEST(StudySpec, StringAndFloatOverridesBecomeTomlLiterals) {
  const StudySpec s = parse_study(
      "[study]\nname = \"x\"\nbase = \"b.toml\"\nseeds = [0]\nout_root = \"/o\"\n"
      "[[variant]]\nname = \"a\"\nset = { \"train.precision\" = \"fp32\", \"optim.lr\" = 1e-3, "
      "\"optim.min_lr_ratio\" = 1.0, \"moe.expert_widths\" = [64, 32] }\n",
      "s.toml");
  ASSERT_EQ(s.variants[0].set.size(), 4u);
  EXPECT_EQ(s.variants[0].set[0].assignment, "train.precision=\"fp32\"");
  EXPECT_EQ(s.variants[0].set[1].assignment, "optim.lr=0.001");
  EXPECT_EQ(s.variants[0].set[2].assignment, "optim.min_lr_ratio=1.0");
  EXPECT_EQ(s.variants[0].set[3].assignment, "moe.expert_widths=[64, 32]");
}

TEST(StudySpec, UnknownVariantFieldNamesPlaceAndSuggestion) {
  std::string text = tiny_study("/o");
  text.replace(text.find("name = \"moe\"\nset"), 16, "name = \"moe\"\nsett");
  const std::string msg = error_of(text);
  EXPECT_NE(msg.find("/studies/s.toml:12:1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("unknown key 'sett'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("did you mean 'set'"), std::string::npos) << msg;
}

TEST(StudySpec, UnknownStudyKeyAndSection) {
  EXPECT_NE(error_of(tiny_study("/o", "[0]", "rank = 2\n")).find("did you mean 'ranks'"),
            std::string::npos);
  EXPECT_NE(error_of(tiny_study("/o") + "[slurmm]\n").find("did you mean 'slurm'"),
            std::string::npos);
  EXPECT_NE(error_of(tiny_study("/o") + "[slurm]\nlauncher = \"ssh\"\n").find("\"srun\""),
            std::string::npos);
}

TEST(StudySpec, UnknownConfigKeyInSetFailsAtParse) {
  std::string text = tiny_study("/o");
  text.replace(text.find("\"moe.top_k\""), 11, "\"moe.topk\"");
  const std::string msg = error_of(text);
  EXPECT_NE(msg.find("variant 'moe'.set"), std::string::npos) << msg;
  EXPECT_NE(msg.find("moe.top_k"), std::string::npos) << msg;  // the suggestion
}

// A list entry's key (a task's limit, a source's weight) is checked against a
// config holding that entry, so a study can set it and a typo still fails.
TEST(StudySpec, ListEntryKeysInSetAreChecked) {
  const std::string head =
      "[study]\nname = \"x\"\nbase = \"b.toml\"\nseeds = [0]\nout_root = \"/o\"\n"
      "[[variant]]\nname = \"a\"\nset = { ";
  const StudySpec s = parse_study(
      head + "\"eval.tasks[1].limit\" = 10, \"data.sources[0].weight\" = 2.0 }\n", "s.toml");
  ASSERT_EQ(s.variants[0].set.size(), 2u);
  EXPECT_EQ(s.variants[0].set[0].assignment, "eval.tasks[1].limit=10");
  const std::string msg = error_of(head + "\"eval.tasks[1].limt\" = 10 }\n");
  EXPECT_NE(msg.find("did you mean 'eval.tasks[1].limit'"), std::string::npos) << msg;
}

TEST(StudySpec, EmptyOrRepeatedSeeds) {
  EXPECT_NE(error_of(tiny_study("/o", "[]")).find("study.seeds must be a non-empty array"),
            std::string::npos);
  const std::string msg = error_of(tiny_study("/o", "[0, 1, 0]"));
  EXPECT_NE(msg.find("/studies/s.toml:4:16"), std::string::npos) << msg;
  EXPECT_NE(msg.find("seed 0 appears twice"), std::string::npos) << msg;
  EXPECT_NE(error_of(tiny_study("/o", "[-1]")).find("integers >= 0"), std::string::npos);
}

TEST(StudySpec, MatchPointingAtMissingVariant) {
  std::string text = tiny_study("/o");
  text.replace(text.find("variant = \"moe\", target = \"active\""), 15, "variant = \"mo\"");
  const std::string msg = error_of(text);
  EXPECT_NE(msg.find("matches variant 'mo', which the study does not define"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("did you mean 'moe'"), std::string::npos) << msg;
}

TEST(StudySpec, ComparedPairsNameTwoVariantsTheStudyDefines) {
  const auto compare_error = [](const std::string& compare) {
    return error_of(tiny_study("/o", "[0]", "compare = " + compare + "\n"));
  };
  const std::string unknown = compare_error("[[\"moe\", \"dense_totl\"]]");
  EXPECT_NE(unknown.find("/studies/s.toml:6:12: study.compare names variant 'dense_totl', which "
                         "the study does not define; did you mean 'dense_total'?"),
            std::string::npos)
      << unknown;
  EXPECT_NE(compare_error("[[\"moe\", \"moe\"]]").find("'moe' compared with itself"),
            std::string::npos);
  for (const char* bad : {"[[\"moe\"]]", "[[\"moe\", 1]]", "[\"moe\", \"dense_total\"]"}) {
    EXPECT_NE(compare_error(bad).find("expected a pair of variant names"), std::string::npos)
        << bad;
  }
  EXPECT_NE(compare_error("\"moe\"").find("study.compare must be a list of pairs"),
            std::string::npos);
}

TEST(StudySpec, MissingRequiredFieldsAndDuplicateVariants) {
  EXPECT_NE(error_of("[study]\nname = \"x\"\n").find("study.base is missing"), std::string::npos);
  EXPECT_NE(error_of("[study]\nname = \"x\"\nbase = \"b\"\nseeds = [0]\nout_root = \"/o\"\n")
                .find("no [[variant]]"),
            std::string::npos);
  EXPECT_NE(error_of(tiny_study("/o") + "[[variant]]\nname = \"moe\"\n").find("defined twice"),
            std::string::npos);
  EXPECT_NE(error_of("[study\n").find("TOML syntax error"), std::string::npos);
}

TEST(StudySpec, LoadNamesUnreadableFile) {
  try {
    load_study("/nonexistent/study.toml");
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/study.toml: cannot open"),
              std::string::npos);
  }
}

}  // namespace
}  // namespace moelab
