// ranks: 1 2
// The NCCL backend on CUDA tensors: collectives and expert dispatch. Skips
// (never fails, and ctest reports it skipped) where NCCL was not built in, no
// GPU is visible, or LibTorch has no CUDA. Its configuration check runs
// everywhere: comm_collectives.cpp.
#include <string>

#include "comm/cuda_device.h"
#include "comm/process_groups.h"
#include "model/all_to_all_dispatcher.h"
#include "mpi_gtest_main.h"
#include "util/error.h"

namespace moelab {
namespace {

// Why the GPU tests cannot run here, or "" when they can.
std::string gpu_unavailable(int world_size) {
#ifndef MOELAB_WITH_NCCL
  return "moelab was built without NCCL (MOELAB_WITH_NCCL=OFF)";
#else
  const int devices = visible_cuda_devices();
  if (devices == 0) return "no GPU visible";
  if (!torch::cuda::is_available()) return "this LibTorch has no CUDA support";
  // NCCL refuses two ranks on one GPU.
  if (devices < world_size) return "fewer GPUs than ranks";
  return "";
#endif
}

#define SKIP_WITHOUT_GPU(world_size)                                     \
  if (const std::string why = gpu_unavailable(world_size); !why.empty()) \
  GTEST_SKIP() << "NCCL test skipped: " << why

int world_size() {
  return make_process_groups(1, 1, Backend::kMpi, false).world->size();
}

TEST(NcclCollectives, CollectivesOnTheGpu) {
  SKIP_WITHOUT_GPU(world_size());
  ProcessGroups groups = make_process_groups(1, 4, Backend::kNccl, true);
  ASSERT_EQ(groups.backend, "nccl");
  auto& comm = *groups.world;
  const int size = comm.size(), rank = comm.rank();
  torch::Tensor sum = torch::full({5}, rank + 1.0f, torch::kCUDA);
  comm.all_reduce_sum(sum);
  EXPECT_TRUE(torch::equal(sum.cpu(), torch::full({5}, size * (size + 1) / 2.0f)));
  torch::Tensor all = comm.all_gather(torch::full(
      {2}, static_cast<int64_t>(rank), torch::TensorOptions(torch::kLong).device(torch::kCUDA)));
  EXPECT_TRUE(torch::equal(all.cpu(), torch::arange(size, torch::kLong).repeat_interleave(2)));
  // Rank r sends r + 1 in every row: each rank's row of the sum is size(size+1)/2.
  const torch::Tensor block =
      comm.reduce_scatter_sum(torch::full({size, 4}, rank + 1.0f, torch::kCUDA));
  EXPECT_TRUE(torch::equal(block.cpu(), torch::full({1, 4}, size * (size + 1) / 2.0f)));
  const torch::Tensor on_root = comm.gather(torch::full({1, 2}, rank + 1.0f, torch::kCUDA), 0);
  EXPECT_EQ(on_root.defined(), rank == 0);
  if (rank == 0) {
    EXPECT_TRUE(
        torch::equal(on_root.cpu(),
                     (torch::arange(size, torch::kFloat) + 1).repeat_interleave(2).view({-1, 2})));
  }
  torch::Tensor root_value = torch::full({3}, static_cast<double>(rank),
                                         torch::TensorOptions(torch::kDouble).device(torch::kCUDA));
  comm.broadcast(root_value, size - 1);
  EXPECT_TRUE(torch::equal(root_value.cpu(), torch::full({3}, size - 1.0, torch::kDouble)));
  comm.barrier();
}

TEST(NcclDispatch, IdentityExpertsReturnTheInputExactly) {
  const int size = world_size();
  SKIP_WITHOUT_GPU(size);
  ProcessGroups groups = make_process_groups(size, 4 * size, Backend::kNccl, true);
  AllToAllDispatcher dispatcher(groups.ep, 4 * size);
  torch::manual_seed(groups.world->rank());
  const torch::Tensor hidden = torch::randn({37, 16}, torch::kCUDA);
  torch::Tensor ids = torch::randint(-1, 4 * size, {37, 2},
                                     torch::TensorOptions(torch::kLong).device(torch::kCUDA));
  const torch::Tensor out = dispatcher.combine(dispatcher.dispatch(hidden, ids).tokens,
                                               torch::ones({37, 2}, hidden.options()));
  const torch::Tensor want = hidden * ids.ge(0).sum(1, true);
  EXPECT_TRUE(torch::equal(out.cpu(), want.cpu()));
}

}  // namespace
}  // namespace moelab

int main(int argc, char** argv) {
  return moelab::run_mpi_tests(&argc, &argv);
}
