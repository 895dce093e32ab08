// Communicator over an MPI communicator. Works on CPU tensors directly; CUDA
// tensors are staged through pinned host memory (MPI is not assumed to be
// CUDA-aware), which also lets several ranks share one GPU.
#pragma once

#include <mpi.h>

#include "comm/communicator.h"

namespace moelab {

class MpiCommunicator : public Communicator {
 public:
  // Takes ownership of `comm` and frees it on destruction (MPI_COMM_WORLD and
  // MPI_COMM_SELF are never freed). Errors come back as exceptions, not aborts.
  explicit MpiCommunicator(MPI_Comm comm);
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void all_reduce_sum(at::Tensor& t) override;
  void all_reduce_max(at::Tensor& t) override;
  // MPI_Iallreduce for contiguous fp32/fp64 CPU tensors; the blocking default
  // for anything else.
  std::unique_ptr<PendingCollective> start_all_reduce_sum(at::Tensor& t) override;
  at::Tensor reduce_scatter_sum(const at::Tensor& t) override;
  // MPI_Ireduce_scatter_block in place for a contiguous fp32/fp64 CPU tensor;
  // the blocking default for anything else.
  std::unique_ptr<PendingCollective> start_reduce_scatter_sum(at::Tensor& t) override;
  at::Tensor all_gather(const at::Tensor& t) override;
  at::Tensor gather(const at::Tensor& t, int root) override;
  at::Tensor all_to_all_v(const at::Tensor& send, const std::vector<int64_t>& send_rows,
                          const std::vector<int64_t>& recv_rows) override;
  void broadcast(at::Tensor& t, int root) override;
  void barrier() override;
  std::string backend() const override { return "mpi"; }

 private:
  void all_reduce(at::Tensor& t, MPI_Op op, const char* name);
  MPI_Datatype datatype(const at::Tensor& work, const char* op) const;
  friend class MpiPendingCollective;
  void check(int code, const char* op) const;
  int checked_count(int64_t count, const char* op) const;

  MPI_Comm comm_;
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace moelab
