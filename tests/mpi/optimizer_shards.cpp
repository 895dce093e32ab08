// ranks: 1 2 3 4
// ZeRO-1's slices against unsharded AdamW on every rank: the same parameters
// after each step (checkpoints of them: checkpoint_layouts.cpp). Its gradient
// reduce-scatter against the all-reduce. The parameters are sized so that some
// ranks get short or empty slices.
#include "parallel/optimizer_shards.h"
#include "comm/process_groups.h"
#include "common/optimizer_test_util.h"
#include "mpi_gtest_main.h"
#include "parallel/grad_sync.h"
#include "parallel/shard_range.h"
#include "train/optimizer.h"

namespace moelab {
namespace {

std::shared_ptr<Communicator> world() {
  return make_process_groups(1, 1, Backend::kMpi, false).world;
}

NamedParams make_params() {
  torch::manual_seed(3);
  return {{"w", torch::randn({5, 3}).requires_grad_()},  // 15 elements
          {"norm", torch::randn({2}).requires_grad_()},  // fewer than the ranks
          {"experts.w", torch::randn({2, 3, 2}).requires_grad_()}};
}

// The same gradients on every rank (as after the data-parallel average), changing per step.
void set_gradients(const NamedParams& params, int step) {
  for (const auto& [name, p] : params) {
    p.mutable_grad() = torch::sin(p.detach() * (step + 1) + 0.5);
  }
}

std::unique_ptr<torch::optim::AdamW> sharded_adamw(const OptimizerShards& shards) {
  std::vector<torch::Tensor> decayed, not_decayed;
  for (size_t i = 0; i < shards.slices().size(); ++i) {
    (shards.is_matrix()[i] ? decayed : not_decayed).push_back(shards.slices()[i].second);
  }
  return make_adamw(std::move(decayed), std::move(not_decayed), testing::optimizer_test_config());
}

void sharded_step(torch::optim::AdamW& optimizer, const OptimizerShards& shards,
                  const NamedParams& params, int step) {
  set_gradients(params, step);
  shards.attach_gradients();
  optimizer.step();
  shards.gather_parameters();
}

void expect_equal(const NamedParams& a, const NamedParams& b) {
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(torch::allclose(a[i].second, b[i].second, 1e-6, 1e-7)) << a[i].first;
  }
}

// One bucket for all parameters, and buckets of at most 8 slice elements (each
// parameter one or more buckets of its own).
class OptimizerShardsTest : public ::testing::TestWithParam<int64_t> {};

TEST_P(OptimizerShardsTest, StepsLikeUnshardedAdamW) {
  const NamedParams reference = make_params();
  auto adamw = make_adamw(reference, testing::optimizer_test_config());
  const NamedParams params = testing::clone_params(reference);
  const OptimizerShards shards(params, world(), GetParam());
  auto optimizer = sharded_adamw(shards);
  for (int step = 0; step < 3; ++step) {
    set_gradients(reference, step);
    adamw->step();
    sharded_step(*optimizer, shards, params, step);
    expect_equal(params, reference);
  }
}

INSTANTIATE_TEST_SUITE_P(Buckets, OptimizerShardsTest, ::testing::Values(1 << 20, 8));

// Each rank's own gradients (they differ by rank, as before the data-parallel
// average), from a loss through the parameters so overlap's hooks fire.
void backward_rank_loss(const NamedParams& params, int rank) {
  torch::Tensor loss = torch::zeros({});
  for (const auto& [name, p] : params) loss = loss + (torch::sin(p * (rank + 2)) * p).sum();
  loss.backward();
}

// Buckets of 4 bytes (one parameter each) and of 1 MiB (all), with and without
// overlap: every rank's slice of each reduce-scattered gradient equals the
// all-reduced average there, and the slices' norms add up to the full norm.
TEST(ShardedGradSync, EachRankGetsTheAverageOfItsSlices) {
  auto comm = world();
  for (const int64_t bucket_bytes : {int64_t{4}, int64_t{1} << 20}) {
    for (const bool overlap : {false, true}) {
      SCOPED_TRACE("bucket " + std::to_string(bucket_bytes) + (overlap ? ", overlap" : ""));
      const NamedParams reference = make_params();
      const NamedParams params = testing::clone_params(reference);
      std::vector<torch::Tensor> ref_tensors, tensors;
      for (const auto& [name, p] : reference) ref_tensors.push_back(p);
      for (const auto& [name, p] : params) tensors.push_back(p);
      GradSync all_reduce(ref_tensors, comm, comm->size(), overlap, bucket_bytes);
      GradSync scatter(tensors, comm, comm->size(), overlap, bucket_bytes,
                       GradReduction::kReduceScatter);
      all_reduce.arm();
      backward_rank_loss(reference, comm->rank());
      all_reduce.sync();
      scatter.arm();
      backward_rank_loss(params, comm->rank());
      scatter.sync();
      const OptimizerShards shards(params, comm);
      shards.attach_gradients();
      torch::Tensor slice_sq = torch::zeros({}, torch::kDouble);
      for (size_t i = 0; i < params.size(); ++i) {
        const torch::Tensor& slice = shards.slices()[i].second;
        const ShardRange range = shard_range(params[i].second.numel(), comm->size(), comm->rank());
        ASSERT_EQ(slice.numel(), range.length);
        const torch::Tensor want =
            reference[i].second.grad().view(-1).narrow(0, range.begin, range.length);
        EXPECT_TRUE(torch::allclose(slice.grad(), want, 1e-6, 1e-7)) << params[i].first;
        slice_sq += slice.grad().to(torch::kDouble).square().sum();
      }
      comm->all_reduce_sum(slice_sq);
      double full_sq = 0;
      for (const auto& t : ref_tensors)
        full_sq += t.grad().to(torch::kDouble).square().sum().item<double>();
      EXPECT_NEAR(slice_sq.item<double>(), full_sq, 1e-9 * full_sq);
    }
  }
}

}  // namespace
}  // namespace moelab

int main(int argc, char** argv) {
  return moelab::run_mpi_tests(&argc, &argv);
}
