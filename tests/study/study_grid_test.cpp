// Grid studies: [[axis]] entries expand to one variant per point (named from
// the values), "*" matches every point, the plan and manifest carry each
// point's coordinates, and the report lays best losses out against the axes.
#include <gtest/gtest.h>

#include "study/axis_report.h"
#include "study/report.h"
#include "study/study_plan.h"
#include "study/study_spec.h"
#include "study_test_util.h"
#include "util/error.h"

namespace moelab {
namespace {

using testing::error_of;
using testing::read_file;
using testing::TempDir;
using testing::write_file;

// num_experts {4, 8} x granularity {1, 2} (top_k and d_expert move together),
// a dense model matched to every point, and one extra variant.
std::string grid_study(const std::string& out_root) {
  return "[study]\nname = \"grid\"\nbase = \"base.toml\"\nseeds = [0]\nout_root = \"" + out_root +
         "\"\n\n[study.set]\n\"moe.enabled\" = true\n\n"
         "[[axis]]\nkey = \"moe.num_experts\"\nvalues = [4, 8]\n\n"
         "[[axis]]\nname = \"granularity\"\nvalues = [1, 2]\n"
         "set = { \"moe.top_k\" = [2, 4], \"moe.d_expert\" = [32, 16] }\n\n"
         "[[variant]]\nname = \"dense\"\nmatch = { variant = \"*\", target = \"active\" }\n\n"
         "[[variant]]\nname = \"extra\"\nset = { \"moe.balance\" = \"none\" }\n";
}

TEST(StudyGrid, AxesExpandToNamedPointsThenVariants) {
  const StudySpec s = parse_study(grid_study("/runs/g"), "/studies/s.toml");
  ASSERT_EQ(s.axes.size(), 2u);
  EXPECT_EQ(s.axes[1].name, "granularity");
  EXPECT_EQ(s.axes[1].labels, (std::vector<std::string>{"1", "2"}));
  std::vector<std::string> names;
  for (const auto& v : s.variants) names.push_back(v.name);
  EXPECT_EQ(names,
            (std::vector<std::string>{
                "num_experts4_granularity1", "num_experts4_granularity2",
                "num_experts8_granularity1", "num_experts8_granularity2",
                "dense_num_experts4_granularity1", "dense_num_experts4_granularity2",
                "dense_num_experts8_granularity1", "dense_num_experts8_granularity2", "extra"}));
  // num_experts 8, granularity 2: the key axis's value, then both zipped keys.
  const auto& p = s.variants[3];
  ASSERT_EQ(p.set.size(), 3u);
  EXPECT_EQ(p.set[0].assignment, "moe.num_experts=8");
  EXPECT_EQ(p.set[1].assignment, "moe.top_k=4");
  EXPECT_EQ(p.set[2].assignment, "moe.d_expert=16");
  EXPECT_EQ(p.point, (std::vector<AxisValue>{{"moe.num_experts", "8"}, {"granularity", "2"}}));
  ASSERT_TRUE(s.variants[7].match);
  EXPECT_EQ(s.variants[7].match->variant, "num_experts8_granularity2");
  EXPECT_EQ(s.variants[7].point, p.point);
  EXPECT_TRUE(s.variants[8].point.empty());
}

TEST(StudyGrid, BadAxesFailWithTheirPlace) {
  const std::string good = grid_study("/runs/g");
  auto with = [&](const std::string& from, const std::string& to) {
    std::string text = good;
    text.replace(text.find(from), from.size(), to);
    return error_of(text);
  };
  EXPECT_NE(with("\"moe.d_expert\" = [32, 16]", "\"moe.d_expert\" = [32]")
                .find("axis 'granularity'.set.\"moe.d_expert\" has 1 entries for 2 values"),
            std::string::npos);
  EXPECT_NE(with("values = [4, 8]", "values = [4, 4]").find("value 4 appears twice"),
            std::string::npos);
  EXPECT_NE(with("key = \"moe.num_experts\"", "key = \"moe.num_expert\"").find("moe.num_expert"),
            std::string::npos);
  EXPECT_NE(with("name = \"granularity\"", "key = \"granularity\"").find("[[axis]] takes either"),
            std::string::npos);
  std::string no_axes = good.substr(0, good.find("[[axis]]")) +
                        "[[variant]]\nname = \"d\"\nmatch = { variant = \"*\" }\n";
  EXPECT_NE(error_of(no_axes).find("matches \"*\" (every grid point), but the study has no"),
            std::string::npos)
      << error_of(no_axes);
}

class GridPlanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    write_file(dir / "base.toml", testing::tiny_base_config("data/tiny"));
    write_file(dir / "study.toml", grid_study(dir / "out"));
    plan = plan_study(load_study(dir / "study.toml"));
  }
  TempDir dir;
  StudyPlan plan;
};

TEST_F(GridPlanTest, ManifestKeepsAxesPointsAndFlops) {
  EXPECT_EQ(plan.axes, (std::vector<std::string>{"moe.num_experts", "granularity"}));
  // Same active width at every granularity: equal active parameters and FLOPs.
  EXPECT_EQ(plan.variants[0].active_params, plan.variants[1].active_params);
  EXPECT_GT(plan.variants[0].total_params, plan.variants[1].total_params);
  EXPECT_GT(plan.variants[0].flops_per_token, 0.0);
  prepare_out_root(plan);
  const StudyPlan m = read_study_manifest(dir / "out");
  EXPECT_EQ(m.axes, plan.axes);
  EXPECT_EQ(m.variants[3].point, plan.variants[3].point);
  EXPECT_DOUBLE_EQ(m.variants[3].flops_per_token, plan.variants[3].flops_per_token);
}

TEST_F(GridPlanTest, ReportPutsTheChosenAxisFirst) {
  EXPECT_EQ(axis_order(plan, "granularity", ""),
            (std::vector<std::string>{"granularity", "moe.num_experts"}));
  EXPECT_THROW(axis_order(plan, "moe.top_k", ""), InputError);
  // Two finished runs: num_experts4_granularity1 (best 3.2) and its dense match.
  for (const char* v : {"num_experts4_granularity1", "dense_num_experts4_granularity1"}) {
    testing::write_run(dir / "out" + "/" + v + "/seed0", 3.2, true);
  }
  const StudyReport report = build_report(plan);
  const std::string csv = axis_summary_csv(report, axis_order(plan, "granularity", ""));
  EXPECT_EQ(csv.substr(0, csv.find('\n')),
            "variant,kind,granularity,moe.num_experts,n,best_mean,best_std,total_params,"
            "active_params");
  EXPECT_NE(csv.find("\nnum_experts4_granularity1,moe,1,4,1,3.2,,"), std::string::npos) << csv;
  EXPECT_NE(csv.find("\ndense_num_experts4_granularity1,dense,1,4,1,3.2,,"), std::string::npos)
      << csv;
  EXPECT_NE(csv.find("\nnum_experts8_granularity2,moe,2,8,0,,,"), std::string::npos) << csv;
  EXPECT_EQ(csv.find("extra"), std::string::npos) << csv;  // off the grid
  EXPECT_NE(summary_markdown(report).find("| num_experts4_granularity1 | 4 | 1 | 1/1 | 3.2000"),
            std::string::npos);
}

}  // namespace
}  // namespace moelab
