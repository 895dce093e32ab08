// The rank groups of a run. Every rank is data parallel for the non-expert
// weights; experts are split over expert-parallel (EP) groups of `ep`
// consecutive ranks; ranks with the same position in their EP group hold the
// same experts and form an expert-data-parallel group.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "config/config.h"

namespace moelab {

struct ProcessGroups {
  std::shared_ptr<Communicator> world;
  std::shared_ptr<Communicator> dp;         // all ranks: non-expert gradients (same group as world)
  std::shared_ptr<Communicator> ep;         // ranks [g*ep, (g+1)*ep): token dispatch
  std::shared_ptr<Communicator> expert_dp;  // ranks with equal rank % ep: expert gradients
  // All ranks over MPI with CPU tensors, whatever the backend: error agreement
  // and host-side values (the same object as world when the backend is MPI).
  std::shared_ptr<Communicator> control;
  int ep_size = 1;
  int ep_rank = 0;
  int64_t num_experts = 0;
  std::vector<std::vector<int64_t>> placement;  // per EP rank: its global experts (placement.h)
  std::string backend;  // resolved: "mpi", "nccl" or "local" (no MPI initialised)

  // Global ids of the experts this rank holds.
  std::vector<int64_t> local_expert_ids() const;
  // e.g. "world 4 = ep 2 x expert-dp 2 (backend mpi); experts [0,1] on ranks {0,2};
  // experts [2,3] on ranks {1,3}". Printed by rank 0 at start.
  std::string layout() const;
};

// Validates on every rank before any collective (errors name parallel.ep,
// moe.num_experts or parallel.backend, and `source` when given), then builds the
// groups. Backend::kAuto is NCCL when tensors are on CUDA and NCCL was built in,
// else MPI. Without an initialised MPI (unit tests) the world
// is this process alone and needs ep = 1. With tensors on CUDA, makes this
// rank's GPU current (select_local_cuda_device). Collective over MPI_COMM_WORLD.
ProcessGroups make_process_groups(int64_t ep, int64_t num_experts, Backend backend,
                                  bool tensors_on_cuda, const std::string& source = "");

// The same from a run configuration (train.device decides whether tensors are
// on CUDA; moe.expert_widths, where the experts go).
ProcessGroups make_process_groups(const Config& config);

}  // namespace moelab
