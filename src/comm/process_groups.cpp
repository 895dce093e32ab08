#include "comm/process_groups.h"

#include <mpi.h>

#include <sstream>

#include "comm/cuda_device.h"
#include "comm/expert_placement.h"
#include "comm/failure.h"
#include "comm/local_communicator.h"
#include "comm/mpi_communicator.h"
#include "util/error.h"
#ifdef MOELAB_WITH_NCCL
#include "comm/nccl_communicator.h"
#endif

namespace moelab {
namespace {

constexpr bool kNcclBuiltIn =
#ifdef MOELAB_WITH_NCCL
    true;
#else
    false;
#endif

bool mpi_initialised() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized && !finalized;
}

// "mpi" or "nccl": the backend the collectives run on.
std::string resolve_backend(Backend backend, bool tensors_on_cuda) {
  if (backend == Backend::kAuto) return tensors_on_cuda && kNcclBuiltIn ? "nccl" : "mpi";
  return choice_name(backend);
}

// Empty when the layout is valid here; otherwise what is wrong, naming the key.
std::string validation_error(int64_t ep, int64_t num_experts, Backend backend, bool tensors_on_cuda,
                             int world_size, const std::string& source) {
  const std::string where = source.empty() ? "" : source + ": ";
  std::ostringstream error;
  if (ep < 1) {
    error << where << "parallel.ep = " << ep << " must be at least 1";
  } else if (world_size % ep != 0) {
    error << where << "parallel.ep = " << ep << " must divide the number of ranks (" << world_size
          << ")";
  } else if (ep > 1 && (num_experts < 1 || num_experts % ep != 0)) {
    error << where << "parallel.ep = " << ep << " must divide moe.num_experts = " << num_experts;
  } else if (backend == Backend::kNccl && !kNcclBuiltIn) {
    error << where << "parallel.backend = 'nccl' but this moelab was built without NCCL "
          << "(MOELAB_WITH_NCCL=OFF); use 'mpi' or 'auto'";
  } else if (backend == Backend::kNccl && !tensors_on_cuda) {
    error << where << "parallel.backend = 'nccl' needs train.device = 'cuda'";
  } else if (backend == Backend::kNccl && visible_cuda_devices() == 0) {
    error << where << "parallel.backend = 'nccl' but no GPU is visible on this rank";
  }
  return error.str();
}

MPI_Comm split_world(int color) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm group;
  if (MPI_Comm_split(MPI_COMM_WORLD, color, rank, &group) != MPI_SUCCESS) {
    throw std::runtime_error("MPI_Comm_split on rank " + std::to_string(rank) + " failed");
  }
  return group;
}

MPI_Comm dup_world() {
  MPI_Comm copy;
  MPI_Comm_dup(MPI_COMM_WORLD, &copy);
  return copy;
}

std::shared_ptr<Communicator> make_communicator(MPI_Comm comm, const std::string& backend) {
#ifdef MOELAB_WITH_NCCL
  if (backend == "nccl") return std::make_shared<NcclCommunicator>(comm);
#endif
  return std::make_shared<MpiCommunicator>(comm);
}

std::string join(const std::vector<int64_t>& values, const char* open, const char* close) {
  std::ostringstream out;
  out << open;
  for (size_t i = 0; i < values.size(); ++i) out << (i ? "," : "") << values[i];
  out << close;
  return out.str();
}

}  // namespace

std::vector<int64_t> ProcessGroups::local_expert_ids() const {
  return placement.empty() ? std::vector<int64_t>{} : placement[ep_rank];
}

std::string ProcessGroups::layout() const {
  const int world_size = world->size();
  std::ostringstream out;
  out << "world " << world_size << " = ep " << ep_size << " x expert-dp " << world_size / ep_size
      << " (backend " << backend << ")";
  if (num_experts < 1) return out.str();
  for (int p = 0; p < ep_size; ++p) {
    std::vector<int64_t> ranks;
    for (int r = p; r < world_size; r += ep_size) ranks.push_back(r);
    out << (p ? "; " : ": ") << "experts " << join(placement[p], "[", "]") << " on ranks "
        << join(ranks, "{", "}");
  }
  return out.str();
}

ProcessGroups make_process_groups(int64_t ep, int64_t num_experts, Backend backend,
                                  bool tensors_on_cuda, const std::string& source) {
  const bool with_mpi = mpi_initialised();
  std::shared_ptr<Communicator> control;
  if (with_mpi) {
    control = std::make_shared<MpiCommunicator>(dup_world());
  } else {
    control = std::make_shared<LocalCommunicator>();
  }
  // Every rank checks the same config; a GPU may be missing on one rank only,
  // so the ranks agree before the first collective that could hang.
  agree_or_throw(*control, validation_error(ep, num_experts, backend, tensors_on_cuda,
                                            control->size(), source));

  ProcessGroups groups;
  groups.ep_size = static_cast<int>(ep);
  groups.ep_rank = static_cast<int>(control->rank() % ep);
  groups.num_experts = num_experts;
  if (num_experts > 0) groups.placement = place_experts(std::vector<int64_t>(num_experts, 1), ep);
  groups.control = control;
  // Before any NCCL communicator exists: it binds to the current device.
  if (tensors_on_cuda) select_local_cuda_device();
  if (!with_mpi) {
    groups.backend = "local";
    groups.world = groups.dp = groups.ep = groups.expert_dp = control;
    return groups;
  }
  groups.backend = resolve_backend(backend, tensors_on_cuda);
  const int rank = control->rank();
  groups.world = groups.backend == "mpi" ? control : make_communicator(dup_world(), "nccl");
  groups.dp = groups.world;
  groups.ep = make_communicator(split_world(rank / groups.ep_size), groups.backend);
  groups.expert_dp = make_communicator(split_world(rank % groups.ep_size), groups.backend);
  return groups;
}

ProcessGroups make_process_groups(const Config& config) {
  ProcessGroups groups =
      make_process_groups(config.parallel.ep, config.moe.num_experts, config.parallel.backend,
                          config.train.device == TrainDevice::kCuda, config.source);
  if (!config.moe.expert_widths.empty()) {
    groups.placement = place_experts(config.moe.expert_widths, groups.ep_size);
  }
  return groups;
}

}  // namespace moelab
