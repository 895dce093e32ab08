// ranks: 1 2 4
// All-reduce, all-gather, broadcast, barrier, process groups and error
// agreement, checked against values each rank can compute on its own.
#include <torch/torch.h>
#include <cstdlib>
#include <string>

#include "comm/cuda_device.h"
#include "comm/failure.h"
#include "comm/process_groups.h"
#include "mpi_gtest_main.h"
#include "util/error.h"

namespace moelab {
namespace {

std::shared_ptr<Communicator> world() {
  return make_process_groups(1, 1, Backend::kMpi, false).world;
}

class AllReduceTest : public ::testing::TestWithParam<torch::ScalarType> {};

TEST_P(AllReduceTest, SumAndMaxOverRanks) {
  auto comm = world();
  const int size = comm->size(), rank = comm->rank();
  // Values small enough to be exact in bf16.
  torch::Tensor sum = (torch::arange(6, torch::kDouble) + rank + 1).to(GetParam());
  torch::Tensor max = sum.clone();
  comm->all_reduce_sum(sum);
  comm->all_reduce_max(max);
  const torch::Tensor base = torch::arange(6, torch::kDouble);
  EXPECT_TRUE(torch::equal(sum, (base * size + size * (size + 1) / 2).to(GetParam())));
  EXPECT_TRUE(torch::equal(max, (base + size).to(GetParam())));
  EXPECT_EQ(sum.scalar_type(), GetParam());
}

INSTANTIATE_TEST_SUITE_P(Dtypes, AllReduceTest,
                         ::testing::Values(torch::kFloat, torch::kDouble, torch::kBFloat16,
                                           torch::kLong, torch::kInt));

TEST(Collectives, AllReduceWritesThroughNonContiguousViews) {
  auto comm = world();
  torch::Tensor base = torch::ones({3, 4});
  torch::Tensor view = base.t();
  comm->all_reduce_sum(view);
  EXPECT_TRUE(torch::equal(base, torch::full({3, 4}, static_cast<float>(comm->size()))));
}

// Rank r contributes base + r, so block p of the sum is size * base + size(size-1)/2
// over rows [2p, 2p+2): exact in every dtype tested.
class ReduceScatterTest : public ::testing::TestWithParam<torch::ScalarType> {};

TEST_P(ReduceScatterTest, EachRankGetsItsBlockOfTheSumBlockingOrStarted) {
  auto comm = world();
  const int size = comm->size(), rank = comm->rank();
  const torch::Tensor base = torch::arange(2 * size * 3, torch::kDouble).view({2 * size, 3});
  const torch::Tensor mine = (base + rank).to(GetParam());
  const torch::Tensor want =
      (base.narrow(0, 2 * rank, 2) * size + size * (size - 1) / 2).to(GetParam());
  const torch::Tensor blocking = comm->reduce_scatter_sum(mine);
  EXPECT_EQ(blocking.scalar_type(), GetParam());
  EXPECT_TRUE(torch::equal(blocking, want)) << blocking;
  torch::Tensor in_place = mine.clone();
  comm->start_reduce_scatter_sum(in_place)->wait();
  EXPECT_TRUE(torch::equal(in_place.narrow(0, 0, 2), want)) << in_place;
}

INSTANTIATE_TEST_SUITE_P(Dtypes, ReduceScatterTest,
                         ::testing::Values(torch::kFloat, torch::kDouble, torch::kBFloat16,
                                           torch::kLong));

// A tensor without dim 0 at every size, and dim 0 of size + 1 where it cannot
// split (more than one rank).
TEST(Collectives, AReduceScatterThatDoesNotSplitEvenlyIsRefused) {
  auto comm = world();
  std::vector<torch::Tensor> refused = {torch::ones({})};
  if (comm->size() > 1) refused.push_back(torch::ones({comm->size() + 1, 2}));
  for (const auto& t : refused) {
    try {
      comm->reduce_scatter_sum(t);
      FAIL() << "no error for shape " << t.sizes();
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("reduce_scatter_sum on rank"), std::string::npos)
          << e.what();
      EXPECT_NE(std::string(e.what()).find("does not split into"), std::string::npos) << e.what();
    }
  }
}

TEST(Collectives, GatherConcatenatesInRankOrderOnTheRootOnly) {
  auto comm = world();
  const int size = comm->size(), root = size - 1;
  const torch::Tensor mine = torch::full({2, 3}, static_cast<double>(comm->rank()));
  const torch::Tensor all = comm->gather(mine, root);
  if (comm->rank() != root) {
    EXPECT_FALSE(all.defined());
  } else {
    EXPECT_TRUE(
        torch::equal(all, torch::arange(size, torch::kDouble).repeat_interleave(6).view({-1, 3})));
  }
  EXPECT_THROW(comm->gather(mine, size), std::invalid_argument);
}

TEST(Collectives, BroadcastFromLastRank) {
  auto comm = world();
  const int root = comm->size() - 1;
  torch::Tensor t = torch::full({4}, static_cast<double>(comm->rank()));
  comm->broadcast(t, root);
  EXPECT_TRUE(torch::equal(t, torch::full({4}, static_cast<double>(root))));
  EXPECT_THROW(comm->broadcast(t, comm->size()), std::invalid_argument);
  comm->barrier();
}

TEST(ProcessGroups, GroupsFollowTheLayout) {
  const int world_size = world()->size();
  for (int64_t ep = 1; ep <= world_size; ep *= 2) {
    if (world_size % ep != 0) continue;
    ProcessGroups groups = make_process_groups(ep, 8, Backend::kAuto, false);
    const int rank = groups.world->rank();
    EXPECT_EQ(groups.backend, "mpi");
    EXPECT_EQ(groups.dp->size(), world_size);
    EXPECT_EQ(groups.ep->size(), ep);
    EXPECT_EQ(groups.ep->rank(), rank % ep);
    EXPECT_EQ(groups.ep_rank, rank % ep);
    EXPECT_EQ(groups.expert_dp->size(), world_size / ep);
    EXPECT_EQ(groups.expert_dp->rank(), rank / ep);
    // EP groups are blocks of consecutive ranks; expert-dp groups share rank % ep.
    torch::Tensor ep_ranks = torch::tensor({static_cast<int64_t>(rank)});
    groups.ep->all_reduce_sum(ep_ranks);
    const int64_t first = rank / ep * ep;
    EXPECT_EQ(ep_ranks.item<int64_t>(), ep * first + ep * (ep - 1) / 2);
    torch::Tensor dp_ranks = torch::tensor({static_cast<int64_t>(rank)});
    groups.expert_dp->all_reduce_sum(dp_ranks);
    const int64_t replicas = world_size / ep;
    EXPECT_EQ(dp_ranks.item<int64_t>(),
              replicas * (rank % ep) + ep * replicas * (replicas - 1) / 2);
    std::vector<int64_t> want_experts;
    for (int64_t e = 0; e < 8 / ep; ++e) want_experts.push_back(rank % ep * (8 / ep) + e);
    EXPECT_EQ(groups.local_expert_ids(), want_experts);
  }
}

TEST(ProcessGroups, LayoutNamesEveryExpertPlacement) {
  if (world()->size() != 4) GTEST_SKIP() << "layout text checked at world size 4";
  EXPECT_EQ(make_process_groups(2, 8, Backend::kMpi, false).layout(),
            "world 4 = ep 2 x expert-dp 2 (backend mpi): experts [0,1,2,3] on ranks {0,2}; "
            "experts [4,5,6,7] on ranks {1,3}");
}

// Every rank sees the same bad setting and throws before any group exists.
void expect_input_error(int64_t ep, int64_t experts, Backend backend, bool cuda,
                        const std::string& key) {
  try {
    make_process_groups(ep, experts, backend, cuda, "run.toml");
    ADD_FAILURE() << "no error for ep " << ep << ", backend " << choice_name(backend);
  } catch (const InputError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find(key), std::string::npos) << message;
    EXPECT_NE(message.find("run.toml"), std::string::npos) << message;
  }
}

TEST(ProcessGroups, BadSettingsAreInputErrorsNamingTheKey) {
  const int world_size = world()->size();
  expect_input_error(world_size + 1, 64, Backend::kMpi, false, "parallel.ep");
  expect_input_error(0, 8, Backend::kMpi, false, "parallel.ep");
  if (world_size > 1)
    expect_input_error(world_size, 3 * world_size + 1, Backend::kMpi, false, "moe.num_experts");
  expect_input_error(1, 8, Backend::kNccl, false, "parallel.backend");
}

// Without a launcher's variable the node-local rank comes from MPI's
// shared-memory split: every rank of this test shares one host.
TEST(NodeLocalRank, FallsBackToTheSharedMemorySplit) {
  const char* saved = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");
  const std::string value = saved ? saved : "";
  unsetenv("OMPI_COMM_WORLD_LOCAL_RANK");
  EXPECT_EQ(node_local_rank(), MpiSession::rank());
  if (saved) setenv("OMPI_COMM_WORLD_LOCAL_RANK", value.c_str(), 1);
}

TEST(ProcessGroups, NcclWithoutCudaTensorsIsAnInputError) {
  try {
    make_process_groups(1, 4, Backend::kNccl, false, "run.toml");
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("parallel.backend"), std::string::npos) << e.what();
  }
}

TEST(AgreeOrThrow, ReturnsWhenNoRankFailed) {
  auto comm = world();
  EXPECT_NO_THROW(agree_or_throw(*comm, ""));
}

TEST(AgreeOrThrow, EveryRankThrowsTheFirstFailingRanksMessage) {
  auto comm = world();
  const int size = comm->size(), rank = comm->rank();
  // Ranks from the middle up fail; the lowest of them is the one reported.
  const int first = size / 2;
  const std::string local = rank >= first ? "bad shard on rank " + std::to_string(rank) : "";
  try {
    agree_or_throw(*comm, local);
    ADD_FAILURE() << "agree_or_throw returned";
  } catch (const InputError& e) {
    const std::string want = rank >= first
                                 ? local
                                 : "rank " + std::to_string(first) +
                                       " reported: bad shard on rank " + std::to_string(first);
    EXPECT_EQ(std::string(e.what()), want);
  }
}

}  // namespace
}  // namespace moelab

int main(int argc, char** argv) {
  return moelab::run_mpi_tests(&argc, &argv);
}
