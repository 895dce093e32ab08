// GradSync's overlap: with arm() before backward, each bucket's all-reduce
// starts from the gradient-accumulator hooks as soon as its gradients are
// complete, in reverse parameter order; without, nothing starts before sync().
// Either way sync() leaves the same averaged gradients.
#include "parallel/grad_sync.h"

#include <gtest/gtest.h>

namespace moelab {
namespace {

// A group of two ranks whose other rank holds the same gradients: a sum
// doubles. Records the first value of every tensor it is asked to reduce, and
// whether backward had finished by then.
class TwinRankCommunicator : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 2; }
  void all_reduce_sum(torch::Tensor& t) override {
    started.push_back(t.numel());
    t.mul_(2);
  }
  void all_reduce_max(torch::Tensor&) override {}
  torch::Tensor all_gather(const torch::Tensor& t) override { return torch::cat({t, t}); }
  torch::Tensor all_to_all_v(const torch::Tensor& t, const std::vector<int64_t>&,
                             const std::vector<int64_t>&) override {
    return t;
  }
  void broadcast(torch::Tensor&, int) override {}
  void barrier() override {}
  std::string backend() const override { return "twin"; }

  std::vector<int64_t> started;  // sizes of the buckets, in the order they started
};

struct TwoLayers {
  torch::Tensor w1 = torch::randn({3, 4}, torch::requires_grad());  // 12 values
  torch::Tensor w2 = torch::randn({2, 3}, torch::requires_grad());  // 6 values
  torch::Tensor loss(const torch::Tensor& x) const {
    return torch::matmul(torch::relu(torch::matmul(x, w1.t())), w2.t()).square().sum();
  }
};

// One bucket per parameter (4-byte floats: 48 and 24 bytes).
constexpr int64_t kBucketBytes = 40;

TEST(GradSync, ArmedBucketsStartDuringBackwardInReverseOrder) {
  torch::manual_seed(0);
  TwoLayers model;
  auto comm = std::make_shared<TwinRankCommunicator>();
  GradSync sync({model.w1, model.w2}, comm, 4.0, /*overlap=*/true, kBucketBytes);
  const auto x = torch::randn({5, 4});
  sync.arm();
  model.loss(x).backward();
  // Both buckets started inside backward: w2's (the last layer's) first.
  EXPECT_EQ(comm->started, (std::vector<int64_t>{6, 12}));
  const auto expected = model.w1.grad().clone() * 2 / 4.0;
  sync.sync();
  EXPECT_EQ(comm->started.size(), 2u);
  EXPECT_TRUE(torch::equal(model.w1.grad(), expected));
}

TEST(GradSync, UnarmedOrWithoutOverlapNothingStartsBeforeSync) {
  for (const bool overlap : {true, false}) {
    torch::manual_seed(0);
    TwoLayers model;
    auto comm = std::make_shared<TwinRankCommunicator>();
    GradSync sync({model.w1, model.w2}, comm, 4.0, overlap, kBucketBytes);
    if (!overlap) sync.arm();
    model.loss(torch::randn({5, 4})).backward();  // an earlier micro-batch: not armed
    EXPECT_TRUE(comm->started.empty()) << "overlap " << overlap;
    const auto expected = model.w2.grad().clone() * 2 / 4.0;
    sync.sync();
    EXPECT_EQ(comm->started, (std::vector<int64_t>{6, 12}));
    EXPECT_TRUE(torch::equal(model.w2.grad(), expected));
  }
}

TEST(GradSync, ABucketWithoutGradientsStartsInSyncInItsTurn) {
  torch::manual_seed(0);
  TwoLayers model;
  torch::Tensor unused = torch::randn({7}, torch::requires_grad());  // an expert with no tokens
  auto comm = std::make_shared<TwinRankCommunicator>();
  // Reverse order: unused's bucket comes first, so nothing may start before it.
  GradSync sync({model.w1, model.w2, unused}, comm, 2.0, /*overlap=*/true, kBucketBytes);
  sync.arm();
  model.loss(torch::randn({5, 4})).backward();
  EXPECT_TRUE(comm->started.empty());
  sync.sync();
  EXPECT_EQ(comm->started, (std::vector<int64_t>{7, 6, 12}));
  EXPECT_TRUE(torch::equal(unused.grad(), torch::zeros({7})));
}

}  // namespace
}  // namespace moelab
