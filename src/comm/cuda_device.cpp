#include "comm/cuda_device.h"

#include <c10/core/impl/VirtualGuardImpl.h>
#include <mpi.h>
#include <torch/torch.h>

#include <cstdlib>
#include <string>

#include "util/error.h"

namespace moelab {
namespace {

// -1 when unset; the value otherwise, or an InputError naming the variable.
int launcher_local_rank(const char* variable) {
  const char* text = std::getenv(variable);
  if (text == nullptr || *text == '\0') return -1;
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  if (*end != '\0' || value < 0 || value > 1 << 20) {
    throw InputError(std::string("environment variable ") + variable + " = '" + text +
                     "' is not a node-local rank (a non-negative integer)");
  }
  return static_cast<int>(value);
}

}  // namespace

int node_local_rank() {
  for (const char* variable : {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID"}) {
    if (const int rank = launcher_local_rank(variable); rank >= 0) return rank;
  }
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized) return 0;
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int rank = 0;
  MPI_Comm_rank(node, &rank);
  MPI_Comm_free(&node);
  return rank;
}

int visible_cuda_devices() {
  return torch::cuda::is_available() ? static_cast<int>(torch::cuda::device_count()) : 0;
}

torch::Device select_local_cuda_device() {
  const int devices = visible_cuda_devices();
  if (devices == 0) {
    throw InputError(
        "train.device = \"cuda\" but no GPU is usable on this rank (is moelab built against "
        "a CUDA LibTorch, on a machine with a GPU and its driver?)");
  }
  const torch::Device device(torch::kCUDA,
                             static_cast<c10::DeviceIndex>(node_local_rank() % devices));
  c10::impl::VirtualGuardImpl(c10::DeviceType::CUDA).setDevice(device);
  return device;
}

torch::Device run_device(const Config& cfg) {
  if (cfg.train.device != TrainDevice::kCuda) return torch::Device(torch::kCPU);
  return c10::impl::VirtualGuardImpl(c10::DeviceType::CUDA).getDevice();
}

}  // namespace moelab
