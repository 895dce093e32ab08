// ranks: 1 2 4
// All-to-all-v with random uneven splits (zero rows for some pairs, ranks that
// send or receive nothing) against a reference built from every rank's data,
// which each rank regenerates from per-rank seeds; forward and backward.
#include <ATen/CPUGeneratorImpl.h>

#include <vector>

#include "comm/all_to_all.h"
#include "comm/process_groups.h"
#include "mpi_gtest_main.h"

namespace moelab {
namespace {

using Splits = std::vector<std::vector<int64_t>>;  // splits[p][q]: rows p sends to q

Splits random_splits(int size, uint64_t seed, bool silent_ranks) {
  at::Generator gen = at::detail::createCPUGenerator(seed);
  torch::Tensor rows = torch::randint(0, 4, {size, size}, gen, torch::kLong);
  // Rank 0 sends nothing; the last rank receives nothing.
  if (silent_ranks) {
    rows[0].zero_();
    rows.select(1, size - 1).zero_();
  }
  Splits splits(size, std::vector<int64_t>(size));
  for (int p = 0; p < size; ++p)
    for (int q = 0; q < size; ++q) splits[p][q] = rows[p][q].item<int64_t>();
  return splits;
}

int64_t sum(const std::vector<int64_t>& v) {
  int64_t total = 0;
  for (int64_t x : v) total += x;
  return total;
}

std::vector<int64_t> column(const Splits& splits, int q) {
  std::vector<int64_t> c;
  for (const auto& row : splits) c.push_back(row[q]);
  return c;
}

// Rows of shape [2, 3] so a row is more than one element; integers for the
// integer dtype so every value survives the cast.
torch::Tensor rank_data(int64_t rows, uint64_t seed, torch::ScalarType dtype) {
  at::Generator gen = at::detail::createCPUGenerator(seed);
  torch::Tensor values = torch::randint(-1000, 1000, {rows, 2, 3}, gen, torch::kDouble);
  if (dtype != torch::kLong) values = values / 8 + torch::randn({rows, 2, 3}, gen, torch::kDouble);
  return values.to(dtype);
}

// What rank q must receive: from each p in order, p's block destined for q.
torch::Tensor expected_receive(const Splits& splits, int q,
                               const std::vector<torch::Tensor>& data) {
  std::vector<torch::Tensor> parts;
  for (size_t p = 0; p < splits.size(); ++p) {
    int64_t offset = 0;
    for (int r = 0; r < q; ++r) offset += splits[p][r];
    parts.push_back(data[p].narrow(0, offset, splits[p][q]));
  }
  return torch::cat(parts);
}

class AllToAllTest : public ::testing::TestWithParam<torch::ScalarType> {};

TEST_P(AllToAllTest, ForwardMatchesReferencePermutation) {
  const torch::ScalarType dtype = GetParam();
  auto world = make_process_groups(1, 1, Backend::kMpi, false).world;
  const int size = world->size(), rank = world->rank();
  for (uint64_t trial = 0; trial < 6; ++trial) {
    const Splits splits = random_splits(size, 77 + trial, trial % 2 == 1);
    std::vector<torch::Tensor> data;
    for (int p = 0; p < size; ++p)
      data.push_back(rank_data(sum(splits[p]), 1000 * trial + p, dtype));
    const torch::Tensor got = world->all_to_all_v(data[rank], splits[rank], column(splits, rank));
    const torch::Tensor want = expected_receive(splits, rank, data);
    EXPECT_EQ(got.scalar_type(), dtype);
    EXPECT_TRUE(torch::equal(got, want)) << "trial " << trial << " on rank " << rank;
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, AllToAllTest,
                         ::testing::Values(torch::kFloat, torch::kDouble, torch::kBFloat16,
                                           torch::kLong));

TEST(AllToAllAutograd, BackwardIsTheReverseExchange) {
  auto world = make_process_groups(1, 1, Backend::kMpi, false).world;
  const int size = world->size(), rank = world->rank();
  for (uint64_t trial = 0; trial < 4; ++trial) {
    const Splits splits = random_splits(size, 500 + trial, trial % 2 == 0);
    std::vector<torch::Tensor> data, weights;
    for (int p = 0; p < size; ++p) {
      data.push_back(rank_data(sum(splits[p]), 10 * trial + p, torch::kDouble));
      weights.push_back(rank_data(sum(column(splits, p)), 90000 + 10 * trial + p, torch::kDouble));
    }
    torch::Tensor send = data[rank].clone().requires_grad_(true);
    torch::Tensor out = all_to_all_v(send, world, splits[rank], column(splits, rank));
    EXPECT_TRUE(torch::equal(out.detach(), expected_receive(splits, rank, data)));
    (out * weights[rank]).sum().backward();

    // d(sum(out_q * w_q))/d(send_p) is w_q's block that came from p, sent back.
    Splits transposed(size, std::vector<int64_t>(size));
    for (int p = 0; p < size; ++p)
      for (int q = 0; q < size; ++q) transposed[q][p] = splits[p][q];
    const torch::Tensor want_grad = expected_receive(transposed, rank, weights);
    ASSERT_TRUE(send.grad().defined());
    EXPECT_TRUE(torch::equal(send.grad(), want_grad)) << "trial " << trial << " on rank " << rank;
  }
}

TEST(AllToAllChecks, WrongSplitsThrowBeforeAnyExchange) {
  auto world = make_process_groups(1, 1, Backend::kMpi, false).world;
  const int size = world->size();
  const torch::Tensor send = torch::zeros({3, 2});
  std::vector<int64_t> too_few(size, 0);
  EXPECT_THROW(world->all_to_all_v(send, too_few, too_few), std::invalid_argument);
  EXPECT_THROW(world->all_to_all_v(send, {}, {}), std::invalid_argument);
  std::vector<int64_t> negative(size, 0);
  negative[0] = -1;
  EXPECT_THROW(world->all_to_all_v(torch::zeros({0, 2}), negative, negative),
               std::invalid_argument);
}

}  // namespace
}  // namespace moelab

int main(int argc, char** argv) {
  return moelab::run_mpi_tests(&argc, &argv);
}
