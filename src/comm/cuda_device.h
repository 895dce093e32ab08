// One rank per GPU: a rank's GPU is its rank among the ranks on its node,
// modulo the GPUs it can see. The node-local rank comes from the launcher
// (Open MPI's OMPI_COMM_WORLD_LOCAL_RANK, Slurm's SLURM_LOCALID, MPICH's
// MPI_LOCALRANKID), else from an MPI shared-memory split, else 0.
#pragma once

#include <ATen/core/Tensor.h>

#include "config/config.h"

namespace moelab {

// The node-local rank. A launcher variable that is not a non-negative integer
// is an InputError naming it.
int node_local_rank();

// GPUs this process can see through LibTorch; 0 without a driver, a device or a
// CUDA LibTorch.
int visible_cuda_devices();

// Makes cuda:(node_local_rank() % visible) the current device and returns it.
// InputError when no GPU is visible.
at::Device select_local_cuda_device();

// Where a run's tensors live: for train.device = "cuda" the current CUDA device
// (make_process_groups has selected this rank's), else the CPU.
at::Device run_device(const Config& cfg);

}  // namespace moelab
