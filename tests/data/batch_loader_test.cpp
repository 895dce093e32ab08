// The loader on synthetic datasets whose token at global position p is
// p % vocab, so every window's expected contents are known exactly.
#include "data/batch_loader.h"

#include <torch/torch.h>
#include <numeric>
#include <set>

#include "data/mixture_schedule.h"
#include "data/seeded_permutation.h"
#include "data/validation_set.h"
#include "data_test_util.h"

namespace moelab {
namespace {

using testing::expect_input_error;
using testing::TempDir;
using testing::write_counting_split;

constexpr int64_t kVocab = 1000;
constexpr int64_t kSeqLen = 7;            // windows of 8 tokens
constexpr int64_t kTokens = 8 * 103 + 5;  // 103 windows and a short tail

torch::Tensor expected_window(int64_t index) {
  return torch::arange(index * (kSeqLen + 1), (index + 1) * (kSeqLen + 1), torch::kInt64) % kVocab;
}

class BatchLoaderTest : public ::testing::Test {
 protected:
  // 7-token documents and 50-token shards: windows straddle documents and shards.
  void SetUp() override { write_counting_split(dir_.str(), "train", kTokens, 7, 50, kVocab); }
  BatchLoader loader(int64_t batch, int rank, int size, int prefetch = 2, uint64_t seed = 3) {
    return BatchLoader(dir_.str(), "train", kSeqLen, batch, rank, size, seed, prefetch);
  }
  TempDir dir_;
};

TEST(SeededPermutation, IsAPermutationThatDependsOnSeedAndStream) {
  const auto a = seeded_permutation(1000, 1, 0);
  EXPECT_EQ(std::set<int64_t>(a.begin(), a.end()).size(), 1000u);
  EXPECT_EQ(*std::min_element(a.begin(), a.end()), 0);
  EXPECT_EQ(*std::max_element(a.begin(), a.end()), 999);
  EXPECT_EQ(a, seeded_permutation(1000, 1, 0));
  EXPECT_NE(a, seeded_permutation(1000, 2, 0));
  EXPECT_NE(a, seeded_permutation(1000, 1, 1));
}

TEST_F(BatchLoaderTest, BatchesHoldThePermutedWindows) {
  BatchLoader single(dir_.str(), "train", kSeqLen, 8, 0, 1, 3, 0);
  EXPECT_EQ(single.windows_per_epoch(), 103);
  EXPECT_EQ(single.sequences_per_epoch(), 96);  // 12 whole batches
  const auto order = seeded_permutation(103, 3, 0);
  for (int b = 0; b < 3; ++b) {
    const torch::Tensor batch = single.next();
    ASSERT_EQ(batch.sizes(), (std::vector<int64_t>{8, kSeqLen + 1}));
    ASSERT_EQ(batch.dtype(), torch::kInt64);
    for (int row = 0; row < 8; ++row) {
      EXPECT_TRUE(batch[row].equal(expected_window(order[b * 8 + row]))) << b << "," << row;
    }
  }
}

TEST_F(BatchLoaderTest, DataBudgetReusesTheFirstWindowsEveryEpoch) {
  // 24 whole windows and 5 tokens: 24 windows, 3 batches of 8 an epoch.
  BatchLoader budget(dir_.str(), "train", kSeqLen, 8, 0, 1, 3, 0, 24 * 8 + 5);
  EXPECT_EQ(budget.windows_per_epoch(), 24);
  EXPECT_EQ(budget.sequences_per_epoch(), 24);
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    const auto order = seeded_permutation(24, 3, uint64_t(epoch));
    std::set<int64_t> seen;
    for (int b = 0; b < 3; ++b) {
      const torch::Tensor batch = budget.next();
      for (int row = 0; row < 8; ++row) {
        EXPECT_TRUE(batch[row].equal(expected_window(order[b * 8 + row])));
        seen.insert(order[b * 8 + row]);
      }
    }
    EXPECT_EQ(seen.size(), 24u);  // each kept window once an epoch
    EXPECT_EQ(*seen.rbegin(), 23);
    EXPECT_EQ(budget.epoch(), epoch + 1);
  }
  EXPECT_NE(seeded_permutation(24, 3, 0), seeded_permutation(24, 3, 1));  // a fresh shuffle
  expect_input_error([&] { BatchLoader(dir_.str(), "train", kSeqLen, 8, 0, 1, 3, 0, 60); },
                     "max_unique_tokens = 60 keeps 7 windows of 8 tokens, fewer than one "
                     "global batch of 8");
}

TEST_F(BatchLoaderTest, GlobalBatchIsTheSameForOneTwoAndFourRanks) {
  BatchLoader one = loader(8, 0, 1);
  std::vector<std::unique_ptr<BatchLoader>> two, four;
  for (int r = 0; r < 2; ++r) {
    two.push_back(std::make_unique<BatchLoader>(dir_.str(), "train", kSeqLen, 8, r, 2, 3, 2));
  }
  for (int r = 0; r < 4; ++r) {
    four.push_back(std::make_unique<BatchLoader>(dir_.str(), "train", kSeqLen, 8, r, 4, 3, 0));
  }
  // 30 batches cross the epoch boundary (12 batches per epoch).
  for (int step = 0; step < 30; ++step) {
    const torch::Tensor reference = one.next();
    std::vector<torch::Tensor> slices2, slices4;
    for (auto& l : two) slices2.push_back(l->next());
    for (auto& l : four) slices4.push_back(l->next());
    EXPECT_EQ(slices4[0].size(0), 2);
    EXPECT_TRUE(torch::cat(slices2).equal(reference)) << "step " << step;
    EXPECT_TRUE(torch::cat(slices4).equal(reference)) << "step " << step;
  }
  EXPECT_EQ(one.state().samples, 240);
  EXPECT_EQ(one.epoch(), 2);
}

TEST_F(BatchLoaderTest, ResumeMidEpochGivesTheExactNextBatch) {
  BatchLoader uninterrupted = loader(4, 1, 2);
  std::vector<torch::Tensor> expected;
  for (int step = 0; step < 40; ++step) expected.push_back(uninterrupted.next());

  BatchLoader first = loader(4, 1, 2);
  for (int step = 0; step < 17; ++step) first.next();
  const LoaderState saved = first.state();
  EXPECT_EQ(saved.samples, 17 * 4);

  for (int prefetch : {0, 3}) {
    BatchLoader resumed = loader(4, 1, 2, prefetch);
    resumed.next();  // consumed before the restore: must not matter
    resumed.restore(saved);
    for (int step = 17; step < 40; ++step) {
      EXPECT_TRUE(resumed.next().equal(expected[step]))
          << "prefetch " << prefetch << " step " << step;
    }
  }
}

TEST_F(BatchLoaderTest, DifferentSeedsGiveDifferentOrders) {
  BatchLoader a = loader(8, 0, 1, 0, 1);
  BatchLoader b = loader(8, 0, 1, 0, 2);
  EXPECT_FALSE(a.next().equal(b.next()));
}

TEST_F(BatchLoaderTest, RejectsBadBatchShapes) {
  expect_input_error([&] { loader(6, 0, 4); }, "multiple of the data-parallel size 4");
  expect_input_error([&] { loader(104, 0, 1); }, "fewer than one global batch");
  expect_input_error([&] { loader(8, 0, 1).restore({-1}); }, "expected a count >= 0");
}

TEST_F(BatchLoaderTest, ValidationWindowsAreFixedAndOrdered) {
  ValidationSet all(dir_.str(), "train", kSeqLen, 0);
  EXPECT_EQ(all.size(), 103);
  const torch::Tensor windows = all.windows(100, 103);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(windows[i].equal(expected_window(100 + i)));
  ValidationSet capped(dir_.str(), "train", kSeqLen, 10);
  EXPECT_EQ(capped.size(), 10);
  EXPECT_TRUE(capped.windows(0, 10).equal(all.windows(0, 10)));
  expect_input_error([&] { capped.windows(5, 11); }, "outside");
}

// Weights rounded to shares of kMixtureScale; after every prefix of g samples
// each source has taken its share to within one sample (the tolerance
// mixture_schedule.h documents), and at() jumps to any position exactly.
TEST(MixtureSchedule, RealisesTheWeightsWithinOneSampleOfEveryPrefix) {
  for (const std::vector<double>& weights : std::vector<std::vector<double>>{
           {0.7, 0.3}, {5, 3, 1, 1}, {1, 2, 3, 4, 5, 6, 7}, {0.001, 1, 1}}) {
    const MixtureSchedule schedule(weights);
    const double total = std::accumulate(weights.begin(), weights.end(), 0.0);
    int64_t shares = 0;
    for (size_t s = 0; s < weights.size(); ++s) {
      EXPECT_LE(std::abs(double(schedule.shares()[s]) / kMixtureScale - weights[s] / total),
                1.0 / kMixtureScale);
      shares += schedule.shares()[s];
    }
    EXPECT_EQ(shares, kMixtureScale);
    MixturePosition pos;
    double worst = 0;
    // Past one period, so the period shortcut of at() is checked against stepping.
    for (int64_t g = 1; g <= kMixtureScale + 5000; ++g) {
      schedule.next(&pos);
      for (size_t s = 0; s < weights.size(); ++s) {
        worst = std::max(worst, std::abs(double(pos.taken[s]) -
                                         double(g) * schedule.shares()[s] / kMixtureScale));
      }
      if (g == kMixtureScale) {
        for (size_t s = 0; s < weights.size(); ++s) EXPECT_EQ(pos.taken[s], schedule.shares()[s]);
      }
    }
    EXPECT_LT(worst, 1.0);
    EXPECT_EQ(schedule.at(pos.samples).taken, pos.taken);
  }
  expect_input_error([] { MixtureSchedule({1.0, -1.0}); }, "expected a finite number > 0");
  expect_input_error([] { MixtureSchedule({1.0, 1e-9}); }, "weight below 1/1048576");
}

// Two sources: this fixture's (first tokens 8i) and one whose windows start
// at 500 + 8j, so a row's first token mod 8 says where it came from.
class MixtureLoaderTest : public BatchLoaderTest {
 protected:
  void SetUp() override {
    BatchLoaderTest::SetUp();
    write_counting_split(other_.str(), "train", 8 * 50, 7, 50, kVocab, "abc", 500);
  }
  std::unique_ptr<BatchLoader> mixture(int rank, int size, int prefetch = 2) {
    return std::make_unique<BatchLoader>(
        std::vector<LoaderSource>{{dir_.str(), 3.0, 0}, {other_.str(), 1.0, 0}}, "train", kSeqLen,
        8, rank, size, 3, prefetch);
  }
  TempDir other_;
};

TEST_F(MixtureLoaderTest, GlobalBatchesAreTheSameAtEveryLayoutAndHoldTheWeights) {
  auto one = mixture(0, 1);
  std::vector<std::unique_ptr<BatchLoader>> two, four;
  for (int r = 0; r < 2; ++r) two.push_back(mixture(r, 2, 0));
  for (int r = 0; r < 4; ++r) four.push_back(mixture(r, 4));
  std::set<int64_t> first_epoch_of_other;
  int64_t from_other = 0;
  // 30 batches: 60 rows of the other source, past its 48-window epoch.
  for (int step = 0; step < 30; ++step) {
    const torch::Tensor reference = one->next();
    std::vector<torch::Tensor> slices2, slices4;
    for (auto& l : two) slices2.push_back(l->next());
    for (auto& l : four) slices4.push_back(l->next());
    EXPECT_TRUE(torch::cat(slices2).equal(reference)) << "step " << step;
    EXPECT_TRUE(torch::cat(slices4).equal(reference)) << "step " << step;
    for (int64_t row = 0; row < 8; ++row) {
      const int64_t first = reference[row][0].item<int64_t>();
      if (first % 8 != 4) continue;
      if (++from_other <= 48) first_epoch_of_other.insert(first);
    }
  }
  // Weights 3:1 repeat every 4 samples: exactly a quarter from the other source.
  EXPECT_EQ(from_other, 60);
  EXPECT_EQ(one->taken(), (std::vector<int64_t>{180, 60}));
  EXPECT_EQ(first_epoch_of_other.size(), 48u);  // each window once an epoch
  EXPECT_EQ(one->epoch(1), 1);
  EXPECT_EQ(one->sequences_per_epoch(1), 48);
}

TEST_F(MixtureLoaderTest, ResumeGivesTheExactNextBatch) {
  auto uninterrupted = mixture(1, 2);
  std::vector<torch::Tensor> expected;
  for (int step = 0; step < 30; ++step) expected.push_back(uninterrupted->next());
  auto first = mixture(1, 2);
  for (int step = 0; step < 13; ++step) first->next();
  for (int prefetch : {0, 3}) {
    auto resumed = mixture(1, 2, prefetch);
    resumed->next();
    resumed->restore(first->state());
    EXPECT_EQ(resumed->taken(), first->taken());
    for (int step = 13; step < 30; ++step) {
      EXPECT_TRUE(resumed->next().equal(expected[step]))
          << "prefetch " << prefetch << " step " << step;
    }
  }
}

TEST_F(MixtureLoaderTest, SourcesOfAnotherTokenizerAreRefusedNamingBoth) {
  TempDir foreign;
  write_counting_split(foreign.str(), "train", 8 * 50, 7, 50, kVocab, "xyz");
  expect_input_error(
      [&] {
        BatchLoader(std::vector<LoaderSource>{{dir_.str(), 1.0, 0}, {foreign.str(), 1.0, 0}},
                    "train", kSeqLen, 8, 0, 1, 3, 0);
      },
      dir_.str() + "/train/manifest.json and " + foreign.str() +
          "/train/manifest.json were encoded with different tokenizers");
}

}  // namespace
}  // namespace moelab
