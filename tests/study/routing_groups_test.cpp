// Groups of sets in a study's routing summary: within, outside and their gap,
// by hand from each run's mean divergences.
#include <gtest/gtest.h>

#include <cmath>

#include "study/routing_summary.h"
#include "util/error.h"

namespace moelab {
namespace {

using Json = nlohmann::json;

// A run's report with only what the groups read: the mean JSD of every pair
// of the sets a, b, c, d.
Json report_with(double ab, double ac, double ad, double bc, double bd, double cd) {
  Json pairs = Json::array();
  const std::vector<std::pair<std::string, std::string>> names = {
      {"a", "b"}, {"a", "c"}, {"a", "d"}, {"b", "c"}, {"b", "d"}, {"c", "d"}};
  const std::vector<double> values = {ab, ac, ad, bc, bd, cd};
  for (size_t i = 0; i < names.size(); ++i) {
    pairs.push_back({{"sets", {names[i].first, names[i].second}}, {"jsd", values[i]}});
  }
  return {{"sets", {"a", "b", "c", "d"}}, {"layers", Json::array()}, {"mean_jsd", pairs}};
}

TEST(RoutingGroups, WithinOutsideAndTheirGapPerSeedThenOverSeeds) {
  const std::vector<std::string> sets = {"a", "b", "c", "d"};
  const std::vector<SetGroup> groups = {parse_set_group("ab=a,b", sets),
                                        parse_set_group("abc=a,b,c", sets)};
  const std::vector<RunRouting> runs = {{"moe", 0, report_with(0.1, 0.5, 0.6, 0.4, 0.7, 0.3)},
                                        {"moe", 1, report_with(0.2, 0.4, 0.6, 0.6, 0.8, 0.2)}};
  const Json g = summarize_routing(runs, groups)["variants"][0]["groups"];
  ASSERT_EQ(g.size(), 2u);
  // Seed 0: within ab 0.1, outside (ac ad bc bd) 0.55, gap 0.45; seed 1: 0.2,
  // 0.6, 0.4.
  EXPECT_DOUBLE_EQ(g[0]["within"]["mean"].get<double>(), 0.15);
  EXPECT_DOUBLE_EQ(g[0]["outside"]["mean"].get<double>(), 0.575);
  EXPECT_DOUBLE_EQ(g[0]["gap"]["mean"].get<double>(), 0.425);
  EXPECT_NEAR(g[0]["gap"]["std"].get<double>(), 0.05 / std::sqrt(2.0), 1e-15);
  EXPECT_EQ(g[0]["gap"]["n"].get<int64_t>(), 2);
  // abc: within (ab ac bc) 1.0/3 and 1.2/3, outside (ad bd cd) 1.6/3 and 1.6/3.
  EXPECT_DOUBLE_EQ(g[1]["within"]["mean"].get<double>(), 1.1 / 3);
  EXPECT_DOUBLE_EQ(g[1]["outside"]["mean"].get<double>(), 1.6 / 3);
  EXPECT_EQ(g[1]["sets"], Json({"a", "b", "c"}));
}

TEST(RoutingGroups, AGroupMustNameTwoOrMoreKnownSetsAndLeaveOneOut) {
  const std::vector<std::string> sets = {"a", "b", "c"};
  const auto error_of = [&](const std::string& arg) -> std::string {
    try {
      parse_set_group(arg, sets);
    } catch (const InputError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_EQ(error_of("ab"), "--group ab: expected NAME=SET,SET,... (e.g. romance=es,it,pt)");
  EXPECT_EQ(error_of("x=a,z"), "--group x=a,z: 'z' is not one of the --set names");
  EXPECT_EQ(error_of("x=a,a"), "--group x=a,a: 'a' is named twice");
  EXPECT_EQ(error_of("x=a,"), "--group x=a,: '' is not one of the --set names");
  const std::string too_few = "a group needs two sets or more and at least one set outside it";
  EXPECT_NE(error_of("x=a").find(too_few), std::string::npos);
  EXPECT_NE(error_of("x=a,b,c").find(too_few), std::string::npos);
  EXPECT_EQ(error_of("x=c,a"), "");
}

}  // namespace
}  // namespace moelab
