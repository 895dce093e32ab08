// Communicator over NCCL for CUDA tensors (compiled only when MOELAB_WITH_NCCL).
// Every collective is enqueued on LibTorch's current CUDA stream, the one the
// compute runs on, so it is ordered after the kernels that produce its inputs
// (and before those that read its outputs) without a host synchronisation.
//
// parallel.timeout_s: an event recorded after each collective tells the
// collective watchdog (comm/watchdog.h) when it completed; one still pending
// past the timeout, or an asynchronous NCCL error (ncclCommGetAsyncError),
// makes the watchdog abort the communicator (ncclCommAbort, which frees the
// kernels waiting on lost peers) and end the process.
#pragma once

#ifdef MOELAB_WITH_NCCL

#include <cuda_runtime_api.h>
#include <mpi.h>
#include <nccl.h>

#include <deque>
#include <mutex>

#include "comm/communicator.h"
#include "comm/watchdog.h"

namespace moelab {

class NcclCommunicator : public Communicator, public AsyncCollectives {
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
  void all_reduce_sum(at::Tensor& t) override;
  void all_reduce_max(at::Tensor& t) override;
  at::Tensor reduce_scatter_sum(const at::Tensor& t) override;
  at::Tensor all_gather(const at::Tensor& t) override;
  at::Tensor gather(const at::Tensor& t, int root) override;
  at::Tensor all_to_all_v(const at::Tensor& send, const std::vector<int64_t>& send_rows,
                          const std::vector<int64_t>& recv_rows) override;
  void broadcast(at::Tensor& t, int root) override;
  void barrier() override;
  std::string backend() const override { return "nccl"; }

  // AsyncCollectives, for the watchdog thread.
  Oldest oldest_unfinished() override;
  std::string async_error() override;
  void abort() override;

 private:
  void all_reduce(at::Tensor& t, ncclRedOp_t op, const char* name);
  void check(ncclResult_t result, const char* op) const;
  void require_cuda(const at::Tensor& t, const char* op) const;
  // Records that `op` was just enqueued on `stream`.
  void enqueued(const char* op, cudaStream_t stream);
  // Drops the completed collectives from the front of pending_ (lock held).
  void forget_completed();

  struct Pending {
    const char* op;
    int64_t enqueued_ms;
    cudaEvent_t done;
  };
  std::mutex pending_mutex_;
  std::deque<Pending> pending_;

  MPI_Comm comm_;
  ncclComm_t nccl_ = nullptr;
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace moelab

#endif  // MOELAB_WITH_NCCL
