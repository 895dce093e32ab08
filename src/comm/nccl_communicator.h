// Communicator over NCCL for CUDA tensors (compiled only when MOELAB_WITH_NCCL).
// Collectives are enqueued on one CUDA stream, the one the compute runs on, so
// they are ordered after the kernels that produce their inputs without a sync.
#pragma once

#ifdef MOELAB_WITH_NCCL

#include <cuda_runtime_api.h>
#include <mpi.h>
#include <nccl.h>

#include "comm/communicator.h"

namespace moelab {

// GPUs this process can see; 0 when there is no device or no driver.
int visible_cuda_devices();

// Selects this rank's GPU: its rank among the ranks on the same node, modulo
// the visible devices (so several ranks may share one GPU).
void bind_local_cuda_device();

class NcclCommunicator : public Communicator {
 public:
  // `comm` holds the same ranks; it is owned (freed on destruction) and carries
  // the NCCL unique id from the group's rank 0 and the host side of barrier().
  // The default stream 0 is the legacy default stream LibTorch computes on
  // unless told otherwise.
  explicit NcclCommunicator(MPI_Comm comm, cudaStream_t stream = nullptr);
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  // For callers that compute on a non-default stream.
  void set_stream(cudaStream_t stream) { stream_ = stream; }

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
  cudaStream_t stream_;
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace moelab

#endif  // MOELAB_WITH_NCCL
