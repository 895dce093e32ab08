// Cutting a dense SwiGLU into experts: disjoint partitions add back up to the
// FFN, balanced k-means finds planted groups, upcycled experts are copies or
// scaled slices with the requested share of units drawn anew.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <set>
#include <vector>

#include "convert/ffn_split.h"
#include "convert/upcycle.h"
#include "util/error.h"

namespace moelab {
namespace {

FfnWeights random_ffn(int64_t d, int64_t hidden, int64_t seed) {
  torch::manual_seed(seed);
  return {torch::randn({hidden, d}), torch::randn({hidden, d}), torch::randn({d, hidden})};
}

torch::Tensor swiglu(const FfnWeights& f, const torch::Tensor& x) {
  return torch::matmul(torch::silu(torch::matmul(x, f.w1.t())) * torch::matmul(x, f.w3.t()),
                       f.w2.t());
}

void expect_balanced(const std::vector<int64_t>& expert_of, int64_t experts) {
  std::vector<int64_t> count(size_t(experts), 0);
  for (int64_t e : expert_of) ++count[size_t(e)];
  for (int64_t c : count) EXPECT_EQ(c, int64_t(expert_of.size()) / experts);
}

TEST(FfnSplit, DisjointExpertsAddUpToTheFfn) {
  const FfnWeights ffn = random_ffn(8, 24, 0);
  const auto x = torch::randn({5, 8});
  for (const auto& expert_of : {random_partition(24, 4, 3), cluster_partition(ffn, 4, 10, 3)}) {
    expect_balanced(expert_of, 4);
    const auto experts = split_by_assignment(ffn, expert_of, 4);
    auto sum = torch::zeros({5, 8});
    for (const auto& e : experts) sum += swiglu(e, x);
    EXPECT_TRUE(torch::allclose(sum, swiglu(ffn, x), 1e-5, 1e-5));
  }
}

TEST(FfnSplit, SplitScalesTheOutputProjectionOnly) {
  const FfnWeights ffn = random_ffn(4, 8, 1);
  const auto experts = split_by_assignment(ffn, {1, 0, 1, 0, 1, 0, 1, 0}, 2, 3.0);
  EXPECT_TRUE(torch::equal(experts[0].w1, ffn.w1.index({torch::tensor({1, 3, 5, 7})})));
  EXPECT_TRUE(torch::allclose(
      experts[1].w2, ffn.w2.index({torch::indexing::Slice(), torch::tensor({0, 2, 4, 6})}) * 3.0));
}

TEST(FfnSplit, ClusteringFindsPlantedGroups) {
  // Four groups of six units each, every unit its group's centre plus small noise.
  torch::manual_seed(5);
  const auto centres = torch::randn({4, 3 * 6}) * 5;
  const auto group = torch::arange(24) % 4;
  const auto features = centres.index_select(0, group) + 0.01 * torch::randn({24, 18});
  const FfnWeights ffn{features.slice(1, 0, 6), features.slice(1, 6, 12),
                       features.slice(1, 12, 18).t()};
  const auto expert_of = cluster_partition(ffn, 4, 20, 0);
  for (int64_t u = 0; u < 24; ++u) {
    for (int64_t v = 0; v < 24; ++v) {
      EXPECT_EQ(expert_of[size_t(u)] == expert_of[size_t(v)],
                group[u].item<int64_t>() == group[v].item<int64_t>())
          << u << " " << v;
    }
  }
}

TEST(Upcycle, CopiesAreTheFfn) {
  const FfnWeights ffn = random_ffn(4, 8, 2);
  const auto experts = upcycle_experts(ffn, {3, 1, 0.0, 0});
  ASSERT_EQ(experts.size(), 3u);
  for (const auto& e : experts) {
    EXPECT_TRUE(torch::equal(e.w1, ffn.w1));
    EXPECT_TRUE(torch::equal(e.w3, ffn.w3));
    EXPECT_TRUE(torch::equal(e.w2, ffn.w2));
  }
}

TEST(Upcycle, GranularSlicesRebuildTheFfnOncePerSlice) {
  const FfnWeights ffn = random_ffn(4, 8, 3);
  const auto experts = upcycle_experts(ffn, {4, 2, 0.0, 0});  // slices 0, 1, 0, 1 of width 4
  ASSERT_EQ(experts[0].width(), 4);
  EXPECT_TRUE(torch::equal(experts[2].w1, ffn.w1.slice(0, 0, 4)));
  EXPECT_TRUE(torch::equal(experts[3].w3, ffn.w3.slice(0, 4, 8)));
  // One copy of each slice with gates 1/2 each: the FFN again.
  const auto x = torch::randn({3, 4});
  EXPECT_TRUE(torch::allclose(0.5 * swiglu(experts[0], x) + 0.5 * swiglu(experts[1], x),
                              swiglu(ffn, x), 1e-5, 1e-5));
}

TEST(Upcycle, ReinitFractionRedrawsThatShareOfUnits) {
  const FfnWeights ffn = random_ffn(4, 20, 4);
  const auto experts = upcycle_experts(ffn, {2, 1, 0.25, 9});
  std::set<int64_t> first;
  for (size_t e = 0; e < experts.size(); ++e) {
    int64_t changed = 0;
    for (int64_t u = 0; u < 20; ++u) {
      const bool same = torch::equal(experts[e].w1[u], ffn.w1[u]);
      EXPECT_EQ(same, torch::equal(experts[e].w3[u], ffn.w3[u])) << "unit " << u;
      EXPECT_EQ(same, torch::equal(experts[e].w2.select(1, u), ffn.w2.select(1, u)));
      if (!same) {
        ++changed;
        if (e == 0) first.insert(u);
      }
    }
    EXPECT_EQ(changed, 5) << "expert " << e;  // round(0.25 * 20)
  }
  std::set<int64_t> second;
  for (int64_t u = 0; u < 20; ++u) {
    if (!torch::equal(experts[1].w1[u], ffn.w1[u])) second.insert(u);
  }
  EXPECT_NE(first, second);  // each expert draws its own units
}

TEST(Upcycle, GranularityMustDivideTheWidthAndTheExperts) {
  const FfnWeights ffn = random_ffn(4, 8, 5);
  EXPECT_THROW(upcycle_experts(ffn, {4, 3, 0.0, 0}), InputError);
  EXPECT_THROW(upcycle_experts(ffn, {3, 2, 0.0, 0}), InputError);
  EXPECT_THROW(upcycle_experts(ffn, {2, 1, 1.5, 0}), InputError);
}

}  // namespace
}  // namespace moelab
