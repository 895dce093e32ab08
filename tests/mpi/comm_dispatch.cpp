// ranks: 1 2 4
// Expert-parallel dispatch against a reference built from every rank's tokens
// (regenerated from per-rank seeds): the rows each rank receives, grouped by
// local expert then source rank; combine after identity and scaling experts;
// gradients through both exchanges, gates' included. Every ep that divides the world is tried.
#include <ATen/CPUGeneratorImpl.h>

#include <vector>

#include "comm/expert_placement.h"
#include "comm/local_communicator.h"
#include "comm/process_groups.h"
#include "model/all_to_all_dispatcher.h"
#include "model/phase_timer.h"
#include "mpi_gtest_main.h"

namespace moelab {
namespace {

constexpr int64_t kExperts = 8;
constexpr int64_t kSlots = 2;
constexpr int64_t kWidth = 4;

struct RankBatch {
  torch::Tensor hidden;      // [T, d] double
  torch::Tensor expert_ids;  // [T, k] int64, -1 = dropped
};

// Token counts differ per rank, and world rank 1 has none at all.
RankBatch make_batch(int world_rank, uint64_t trial, bool with_drops) {
  static const int64_t kTokens[] = {6, 0, 9, 4};
  const int64_t tokens = kTokens[world_rank % 4] + world_rank / 4;
  at::Generator gen = at::detail::createCPUGenerator(7919 * trial + world_rank);
  RankBatch batch;
  batch.hidden = torch::randn({tokens, kWidth}, gen, torch::kDouble);
  // Experts 0..E-2 only, so the last expert always receives zero rows.
  batch.expert_ids = torch::randint(0, kExperts - 1, {tokens, kSlots}, gen, torch::kLong);
  if (with_drops) {
    const torch::Tensor drop = torch::rand({tokens, kSlots}, gen, torch::kDouble) < 0.3;
    batch.expert_ids.masked_fill_(drop, -1);
  }
  return batch;
}

// Rows rank `ep_rank` of the EP group starting at world rank `first` must
// receive: per local expert, per source rank, that source's assignments to
// the expert in (token, slot) order.
DispatchedTokens reference_dispatch(int first, int ep, const std::vector<int64_t>& local_ids,
                                    uint64_t trial, bool with_drops) {
  DispatchedTokens want;
  std::vector<torch::Tensor> rows;
  for (int64_t expert : local_ids) {
    int64_t count = 0;
    for (int source = first; source < first + ep; ++source) {
      const RankBatch batch = make_batch(source, trial, with_drops);
      for (int64_t t = 0; t < batch.hidden.size(0); ++t)
        for (int64_t j = 0; j < kSlots; ++j)
          if (batch.expert_ids[t][j].item<int64_t>() == expert) {
            rows.push_back(batch.hidden[t]);
            ++count;
          }
    }
    want.counts.push_back(count);
  }
  want.tokens = rows.empty() ? torch::zeros({0, kWidth}, torch::kDouble) : torch::stack(rows);
  return want;
}

// Each dispatched row scaled by (its global expert id + 1): with random gates,
// checks that combine brings every expert's output back to the right (token, slot).
torch::Tensor scaled_by_expert(const DispatchedTokens& d, const std::vector<int64_t>& ids) {
  const torch::Tensor scale =
      torch::repeat_interleave(torch::tensor(ids, torch::kLong).to(torch::kDouble) + 1,
                               torch::tensor(d.counts, torch::kLong));
  return d.tokens * scale.unsqueeze(1);
}

struct Layout {
  int world_size;
  int rank;
};

Layout world_layout() {
  auto world = make_process_groups(1, kExperts, Backend::kMpi, false).world;
  return {world->size(), world->rank()};
}

// Experts placed by width (comm/expert_placement.h) when `widths` is given,
// else in contiguous blocks.
void expect_matches_reference(const std::vector<int64_t>& widths) {
  const Layout layout = world_layout();
  for (int ep = 1; ep <= layout.world_size; ep *= 2) {
    ProcessGroups groups = make_process_groups(ep, kExperts, Backend::kMpi, false);
    if (!widths.empty()) groups.placement = place_experts(widths, ep);
    AllToAllDispatcher dispatcher(groups.ep, groups.placement);
    EXPECT_EQ(dispatcher.local_expert_ids(), groups.local_expert_ids());
    PhaseTimer::reset();
    PhaseTimer::enable(true);
    for (uint64_t trial = 0; trial < 4; ++trial) {
      const bool drops = trial % 2 == 1;
      SCOPED_TRACE("world " + std::to_string(layout.world_size) + " ep " + std::to_string(ep) +
                   " trial " + std::to_string(trial) + " rank " + std::to_string(layout.rank));
      const RankBatch batch = make_batch(layout.rank, trial, drops);
      const DispatchedTokens got = dispatcher.dispatch(batch.hidden, batch.expert_ids);
      const DispatchedTokens want = reference_dispatch(layout.rank / ep * ep, ep,
                                                       dispatcher.local_expert_ids(), trial, drops);
      EXPECT_EQ(got.counts, want.counts);
      EXPECT_TRUE(torch::equal(got.tokens, want.tokens));

      const torch::Tensor gates = torch::rand(batch.expert_ids.sizes(), torch::kDouble);
      const torch::Tensor out =
          dispatcher.combine(scaled_by_expert(got, dispatcher.local_expert_ids()), gates);
      const torch::Tensor kept = batch.expert_ids.ge(0).unsqueeze(2);
      const torch::Tensor scale = (batch.expert_ids + 1).to(torch::kDouble).unsqueeze(2);
      const torch::Tensor want_out =
          torch::where(kept, batch.hidden.unsqueeze(1) * scale * gates.unsqueeze(2),
                       torch::zeros({}, torch::kDouble))
              .sum(1);
      EXPECT_TRUE(torch::allclose(out, want_out, 1e-12, 1e-12));
    }
    PhaseTimer::enable(false);
    // Each phase is timed; a group of one exchanges nothing.
    EXPECT_GT(PhaseTimer::seconds(Phase::kPermute), 0);
    EXPECT_GT(PhaseTimer::seconds(Phase::kUnpermute), 0);
    EXPECT_EQ(PhaseTimer::seconds(Phase::kExchange) > 0, ep > 1);
  }
}

TEST(AllToAllDispatch, MatchesReferenceForEveryEp) {
  expect_matches_reference({});
}

// Heterogeneous widths place experts out of id order (at ep 2: ranks hold
// {0, 1, 4, 6} and {2, 3, 5, 7}), so rows must be grouped by destination, not id.
TEST(AllToAllDispatch, MatchesReferenceForExpertsPlacedByWidth) {
  const std::vector<int64_t> widths = {8, 1, 1, 8, 4, 4, 2, 2};
  EXPECT_EQ(place_experts(widths, 2),
            (std::vector<std::vector<int64_t>>{{0, 1, 4, 6}, {2, 3, 5, 7}}));
  expect_matches_reference(widths);
}

TEST(AllToAllDispatch, IdentityExpertsReturnTheInputExactly) {
  const Layout layout = world_layout();
  for (int ep = 1; ep <= layout.world_size; ep *= 2) {
    AllToAllDispatcher dispatcher(make_process_groups(ep, kExperts, Backend::kMpi, false).ep,
                                  kExperts);
    for (bool drops : {false, true}) {
      const RankBatch batch = make_batch(layout.rank, 11, drops);
      const torch::Tensor hidden = batch.hidden.to(torch::kFloat);
      const torch::Tensor out =
          dispatcher.combine(dispatcher.dispatch(hidden, batch.expert_ids).tokens,
                             torch::ones(batch.expert_ids.sizes()));
      const torch::Tensor want = hidden * batch.expert_ids.ge(0).sum(1, true);
      EXPECT_TRUE(torch::equal(out, want)) << "ep " << ep << " drops " << drops;
    }
  }
}

TEST(AllToAllDispatch, GradientsFlowBackThroughBothExchanges) {
  const Layout layout = world_layout();
  for (int ep = 1; ep <= layout.world_size; ep *= 2) {
    AllToAllDispatcher dispatcher(make_process_groups(ep, kExperts, Backend::kMpi, false).ep,
                                  kExperts);
    const RankBatch batch = make_batch(layout.rank, 23, true);
    const torch::Tensor hidden = batch.hidden.clone().requires_grad_(true);
    const torch::Tensor gates =
        torch::rand(batch.expert_ids.sizes(), torch::kDouble).requires_grad_(true);
    const DispatchedTokens d = dispatcher.dispatch(hidden, batch.expert_ids);
    const torch::Tensor out =
        dispatcher.combine(scaled_by_expert(d, dispatcher.local_expert_ids()), gates);
    const torch::Tensor weights = torch::randn_like(out);
    (out * weights).sum().backward();
    // out[t] = sum_j g[t,j] * (id[t,j] + 1) * h[t] over kept slots j.
    const torch::Tensor factor =
        torch::where(batch.expert_ids.ge(0), (batch.expert_ids + 1).to(torch::kDouble),
                     torch::zeros({}, torch::kDouble));
    const torch::Tensor want = weights * (factor * gates.detach()).sum(1, true);
    ASSERT_TRUE(hidden.grad().defined());
    EXPECT_TRUE(torch::allclose(hidden.grad(), want, 1e-12, 1e-12)) << "ep " << ep;
    const torch::Tensor want_gates = factor * (weights * batch.hidden).sum(1, true);
    EXPECT_TRUE(torch::allclose(gates.grad(), want_gates, 1e-12, 1e-12)) << "ep " << ep;
  }
}

TEST(AllToAllDispatch, WorldOfOneWithoutMpiIsALocalPermutation) {
  const Layout layout = world_layout();
  AllToAllDispatcher dispatcher(std::make_shared<LocalCommunicator>(), kExperts);
  const RankBatch batch = make_batch(layout.rank, 5, true);
  const DispatchedTokens got = dispatcher.dispatch(batch.hidden, batch.expert_ids);
  // A single rank's own assignments, as an EP group of one would see them.
  const DispatchedTokens want =
      reference_dispatch(layout.rank, 1, experts_of_ep_rank(0, 1, kExperts), 5, true);
  EXPECT_EQ(got.counts, want.counts);
  EXPECT_TRUE(torch::equal(got.tokens, want.tokens));
  const torch::Tensor want_out = batch.hidden * batch.expert_ids.ge(0).sum(1, true);
  EXPECT_TRUE(torch::equal(
      dispatcher.combine(got.tokens, torch::ones(batch.expert_ids.sizes(), torch::kDouble)),
      want_out));
}

TEST(AllToAllDispatch, RejectsIdsOutsideTheExperts) {
  AllToAllDispatcher dispatcher(std::make_shared<LocalCommunicator>(), kExperts);
  EXPECT_THROW(dispatcher.dispatch(torch::zeros({1, kWidth}),
                                   torch::full({1, kSlots}, kExperts, torch::kLong)),
               std::invalid_argument);
  EXPECT_THROW(dispatcher.combine(torch::zeros({0, kWidth}), torch::zeros({0, kSlots})),
               std::logic_error);
}

}  // namespace
}  // namespace moelab

int main(int argc, char** argv) {
  return moelab::run_mpi_tests(&argc, &argv);
}
