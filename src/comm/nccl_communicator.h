// Communicator over NCCL for CUDA tensors (compiled only when MOELAB_WITH_NCCL).
// Every collective is enqueued on LibTorch's current CUDA stream, the one the
// compute runs on, so it is ordered after the kernels that produce its inputs
// (and before those that read its outputs) without a host synchronisation.
#pragma once

#ifdef MOELAB_WITH_NCCL

#include <mpi.h>
#include <nccl.h>

#include "comm/communicator.h"

namespace moelab {

class NcclCommunicator : public Communicator {
 public:
  // `comm` holds the same ranks; it is owned (freed on destruction) and carries
  // the NCCL unique id from the group's rank 0 and the host side of barrier().
  // The NCCL communicator binds to the current CUDA device (select it first).
  explicit NcclCommunicator(MPI_Comm comm);
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void all_reduce_sum(torch::Tensor& t) override;
  void all_reduce_max(torch::Tensor& t) override;
  torch::Tensor all_gather(const torch::Tensor& t) override;
  torch::Tensor all_to_all_v(const torch::Tensor& send, const std::vector<int64_t>& send_rows,
                             const std::vector<int64_t>& recv_rows) override;
  void broadcast(torch::Tensor& t, int root) override;
  void barrier() override;
  std::string backend() const override { return "nccl"; }

 private:
  void all_reduce(torch::Tensor& t, ncclRedOp_t op, const char* name);
  void check(ncclResult_t result, const char* op) const;
  void require_cuda(const torch::Tensor& t, const char* op) const;

  MPI_Comm comm_;
  ncclComm_t nccl_ = nullptr;
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace moelab

#endif  // MOELAB_WITH_NCCL
