// LocalDispatcher: grouping by expert, exact round trip, dropped assignments,
// and gradients through dispatch and the gate-weighted combine.
#include <gtest/gtest.h>

#include "model/local_dispatcher.h"
#include "model/token_permutation.h"

namespace moelab {
namespace {

TEST(LocalDispatcher, GroupsRowsByExpertInTokenOrder) {
  LocalDispatcher dispatcher(3);
  const auto hidden = torch::arange(4, torch::kDouble).view({4, 1});
  const auto ids = torch::tensor({2, 0, 0, 1, 2, 1, 0, 2}, torch::kLong).view({4, 2});
  const auto out = dispatcher.dispatch(hidden, ids);
  EXPECT_EQ(out.counts, (std::vector<int64_t>{3, 2, 3}));
  // expert 0: tokens 0, 1, 3; expert 1: tokens 1, 2; expert 2: tokens 0, 2, 3.
  const auto expected =
      torch::tensor({0., 1., 3., 1., 2., 0., 2., 3.}, torch::kDouble).view({8, 1});
  EXPECT_TRUE(torch::equal(out.tokens, expected)) << out.tokens;
  EXPECT_EQ(dispatcher.local_expert_ids(), (std::vector<int64_t>{0, 1, 2}));
}

// Small integers, so that every sum is exact.
TEST(LocalDispatcher, IdentityExpertsRoundTripExactly) {
  torch::manual_seed(5);
  LocalDispatcher dispatcher(4);
  const auto hidden = torch::randint(-50, 50, {9, 5}).to(torch::kFloat);
  const auto ids = torch::randint(0, 4, {9, 3}, torch::kLong);
  const auto gates = torch::randint(1, 5, {9, 3}).to(torch::kFloat);
  const auto combined = dispatcher.combine(dispatcher.dispatch(hidden, ids).tokens, gates);
  EXPECT_TRUE(torch::equal(combined, hidden * gates.sum(1, true)));
}

TEST(LocalDispatcher, DroppedAssignmentsAddNothing) {
  LocalDispatcher dispatcher(2);
  const auto hidden = torch::ones({2, 3});
  const auto ids = torch::tensor({0, -1, -1, 1}, torch::kLong).view({2, 2});
  const auto dispatched = dispatcher.dispatch(hidden, ids);
  EXPECT_EQ(dispatched.counts, (std::vector<int64_t>{1, 1}));
  const auto gates = torch::tensor({2.f, 3.f, 5.f, 7.f}).view({2, 2}).requires_grad_(true);
  const auto combined = dispatcher.combine(dispatched.tokens, gates);
  EXPECT_TRUE(torch::equal(combined, torch::tensor({2.f, 2.f, 2.f, 7.f, 7.f, 7.f}).view({2, 3})))
      << combined;
  combined.sum().backward();
  EXPECT_TRUE(torch::equal(gates.grad(), torch::tensor({3.f, 0.f, 0.f, 3.f}).view({2, 2})))
      << gates.grad();
}

TEST(LocalDispatcher, GradientFlowsBackToEachTokenOncePerAssignment) {
  LocalDispatcher dispatcher(3);
  const auto hidden = torch::randn({4, 2}, torch::kDouble).requires_grad_(true);
  const auto ids = torch::tensor({2, 0, -1, 1, 1, 0, 0, -1}, torch::kLong).view({4, 2});
  const auto dispatched = dispatcher.dispatch(hidden, ids);
  dispatcher.combine(dispatched.tokens * 3.0, torch::ones({4, 2}, torch::kDouble)).sum().backward();
  // d/dh of sum over kept assignments of 3 h = 3 * (number of kept slots).
  const auto expected =
      torch::tensor({6., 6., 3., 3., 6., 6., 3., 3.}, torch::kDouble).view({4, 2});
  EXPECT_TRUE(torch::equal(hidden.grad(), expected)) << hidden.grad();
}

// The dispatcher's gathers and its combine have hand-written backwards; plain
// index_select/index_copy autograd and a weighted sum are the reference.
TEST(LocalDispatcher, GradientsMatchPlainIndexingWithDropsAndRandomUpstream) {
  torch::manual_seed(11);
  const int64_t tokens = 7, slots = 2, width = 3;
  const auto ids = torch::randint(-1, 4, {tokens, slots}, torch::kLong);
  const auto hidden = torch::randn({tokens, width}, torch::kDouble);
  const auto gates = torch::randn({tokens, slots}, torch::kDouble);
  const auto upstream = torch::randn({tokens, width}, torch::kDouble);

  LocalDispatcher dispatcher(4);
  const auto h = hidden.clone().requires_grad_(true);
  const auto dispatched = dispatcher.dispatch(h, ids);
  const int64_t kept = dispatched.tokens.size(0);
  const auto scale = torch::randn({kept, 1}, torch::kDouble).requires_grad_(true);
  const auto g = gates.clone().requires_grad_(true);
  (dispatcher.combine(dispatched.tokens * scale, g) * upstream).sum().backward();

  const auto flat = ids.reshape({-1});
  const auto order = std::get<1>(torch::where(flat < 0, 4, flat).sort(true, 0, false));
  const auto kept_order = order.slice(0, 0, kept);
  const auto ref_h = hidden.clone().requires_grad_(true);
  const auto ref_scale = scale.detach().clone().requires_grad_(true);
  const auto ref_g = gates.clone().requires_grad_(true);
  const auto rows = ref_h.index_select(0, kept_order.div(slots, "floor")) * ref_scale;
  const auto combined = torch::zeros({tokens * slots, width}, torch::kDouble)
                            .index_copy(0, kept_order, rows)
                            .view({tokens, slots, width});
  ((combined * ref_g.unsqueeze(2)).sum(1) * upstream).sum().backward();

  EXPECT_TRUE(torch::allclose(h.grad(), ref_h.grad(), 1e-12, 1e-12)) << h.grad() << ref_h.grad();
  EXPECT_TRUE(torch::allclose(scale.grad(), ref_scale.grad(), 1e-12, 1e-12));
  EXPECT_TRUE(torch::allclose(g.grad(), ref_g.grad(), 1e-12, 1e-12)) << g.grad() << ref_g.grad();
}

TEST(LocalDispatcher, EmptyBatchRoundTripsWithAnEmptyGradient) {
  LocalDispatcher dispatcher(2);
  const auto hidden = torch::zeros({0, 3}).requires_grad_(true);
  const auto dispatched = dispatcher.dispatch(hidden, torch::zeros({0, 2}, torch::kLong));
  EXPECT_EQ(dispatched.counts, (std::vector<int64_t>{0, 0}));
  const auto combined = dispatcher.combine(dispatched.tokens, torch::zeros({0, 2}));
  EXPECT_EQ(combined.sizes(), (std::vector<int64_t>{0, 3}));
  combined.sum().backward();
  EXPECT_EQ(hidden.grad().sizes(), (std::vector<int64_t>{0, 3}));
}

// The CPU's counting sort against torch's stable sort (the path devices take):
// the same order, its inverse, counts and kept, with drops, at a fine-grained
// layer's size.
TEST(SortAssignments, CountingSortMatchesTorchsStableSort) {
  torch::manual_seed(3);
  const int64_t experts = 64;
  const auto ids = torch::randint(-1, experts, {2048, 8}, torch::kLong);
  const auto sorted = sort_assignments(ids, experts);

  const auto flat = ids.reshape({-1});
  const auto keys = torch::where(flat < 0, experts, flat);
  const auto order = std::get<1>(keys.sort(/*stable=*/true, 0, false));
  EXPECT_TRUE(torch::equal(sorted.order, order));
  EXPECT_TRUE(torch::equal(sorted.order.index_select(0, sorted.unsort),
                           torch::arange(flat.numel(), torch::kLong)));
  const auto counts = keys.bincount({}, experts + 1);
  EXPECT_EQ(sorted.counts,
            std::vector<int64_t>(counts.data_ptr<int64_t>(), counts.data_ptr<int64_t>() + experts));
  EXPECT_EQ(sorted.kept, (flat >= 0).sum().item<int64_t>());
  EXPECT_EQ(sorted.tokens, 2048);
  EXPECT_EQ(sorted.slots, 8);
}

TEST(SortAssignments, RejectsIdsOutsideMinusOneToExperts) {
  for (const int64_t bad : {-2L, 4L}) {
    const auto ids = torch::tensor(std::vector<int64_t>{0, bad, 1, 2}).view({2, 2});
    EXPECT_THROW(sort_assignments(ids, 4), std::invalid_argument) << bad;
  }
}

}  // namespace
}  // namespace moelab
