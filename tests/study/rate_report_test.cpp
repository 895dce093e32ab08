// Activation-rate sweeps: the plan and manifest carry each variant's rate and
// data budget, and the report lays best losses out against the rate, with the
// epochs each variant made over the unique data.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "config/load.h"
#include "study/rate_report.h"
#include "study/report.h"
#include "study/study_plan.h"
#include "study/study_spec.h"
#include "study_test_util.h"

namespace moelab {
namespace {

using testing::TempDir;
using testing::write_file;

// A dense model and MoEs at rates 1/2 and 1/4, all of the dense total, with
// 640 unique training tokens.
std::string rate_study(const std::string& out_root) {
  return "[study]\nname = \"rates\"\nbase = \"base.toml\"\nseeds = [0, 1]\nout_root = \"" +
         out_root +
         "\"\n\n[study.set]\n\"data.max_unique_tokens\" = 640\n\n"
         "[[variant]]\nname = \"dense\"\nset = { \"model.d_ff\" = 256 }\n\n"
         "[[variant]]\nname = \"half\"\nmatch = { variant = \"dense\", target = \"total\", "
         "activation_rate = 0.5, experts = 4 }\n\n"
         "[[variant]]\nname = \"quarter\"\nmatch = { variant = \"dense\", target = \"total\", "
         "activation_rate = 0.25, experts = 8 }\n";
}

class RateReportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    write_file(dir / "base.toml", testing::tiny_base_config("data/tiny"));
    write_file(dir / "study.toml", rate_study(dir / "out"));
    plan = plan_study(load_study(dir / "study.toml"));
  }
  TempDir dir;
  StudyPlan plan;
};

TEST_F(RateReportTest, ManifestKeepsRatesAndDataBudget) {
  EXPECT_DOUBLE_EQ(plan.variants[0].activation_rate, 0.0);
  EXPECT_DOUBLE_EQ(plan.variants[1].activation_rate, 0.5);
  EXPECT_DOUBLE_EQ(plan.variants[2].activation_rate, 0.25);
  EXPECT_EQ(plan.variants[2].unique_tokens, 640);
  prepare_out_root(plan);
  const StudyPlan m = read_study_manifest(dir / "out");
  EXPECT_DOUBLE_EQ(m.variants[2].activation_rate, 0.25);
  EXPECT_EQ(m.variants[2].unique_tokens, 640);
  EXPECT_EQ(m.variants[2].top_k, 2);  // 8 experts at rate 1/4
}

TEST_F(RateReportTest, SummaryGivesRateTokensAndEpochs) {
  // Finished: dense seeds 0 and 1 (best 3.0 and 3.2), half seed 0 (best 2.9);
  // quarter has no finished run. Each fabricated run trained 1280 tokens.
  testing::write_run(dir / "out/dense/seed0", 3.0, true);
  testing::write_run(dir / "out/dense/seed1", 3.2, true);
  testing::write_run(dir / "out/half/seed0", 2.9, true);
  const StudyReport report = build_report(plan);
  ASSERT_TRUE(has_rate_sweep(report));
  const std::string csv = rate_summary_csv(report);
  EXPECT_EQ(csv.substr(0, csv.find('\n')),
            "variant,kind,activation_rate,top_k,n,best_mean,best_std,total_params,active_params,"
            "flops_per_token,tokens,epochs");
  // 1280 tokens over 640 unique ones: 2 epochs; mean 3.1 with sample std 0.141421.
  EXPECT_NE(csv.find("\ndense,dense,1,0,2,3.1,0.141421,"), std::string::npos) << csv;
  EXPECT_NE(csv.find(",1280,2\n"), std::string::npos) << csv;
  EXPECT_NE(csv.find("\nhalf,moe,0.5,2,1,2.9,,"), std::string::npos) << csv;
  // Unfinished: no loss, and tokens and epochs from the plan.
  const auto& quarter = plan.variants[2];
  EXPECT_NE(csv.find("\nquarter,moe,0.25,2,0,,,"), std::string::npos) << csv;
  EXPECT_NE(csv.find(fmt::format(",{},{:.6g}\n", quarter.tokens, quarter.tokens / 640.0)),
            std::string::npos)
      << csv;
  const std::string md = summary_markdown(report);
  EXPECT_NE(md.find("## Best validation loss by activation rate"), std::string::npos);
  EXPECT_NE(md.find("| half | 0.5 | 2 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| 1280 | 2.00 | 2/2 | 3.1000"), std::string::npos) << md;
}

TEST_F(RateReportTest, OneRateIsNoSweep) {
  std::string text = rate_study(dir / "out2");
  text.erase(text.find("[[variant]]\nname = \"quarter\""));
  write_file(dir / "study.toml", text);
  const StudyReport report = build_report(plan_study(load_study(dir / "study.toml")));
  EXPECT_FALSE(has_rate_sweep(report));
  EXPECT_EQ(rate_summary_markdown(report), "");
}

}  // namespace
}  // namespace moelab
