// The collectives moelab needs, independent of the transport. One instance
// stands for one group of ranks (world, an expert-parallel group, ...); every
// rank of the group must call the same collectives in the same order.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace moelab {

// A collective started by one call and completed by wait().
class PendingCollective {
 public:
  virtual ~PendingCollective() = default;
  // Lets the collective advance without blocking (MPI moves non-blocking
  // collectives along only inside MPI calls).
  virtual void progress() {}
  virtual void wait() = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  // In place; bf16/fp16 are reduced in fp32 and rounded back once.
  virtual void all_reduce_sum(at::Tensor& t) = 0;
  virtual void all_reduce_max(at::Tensor& t) = 0;
  // Starts all_reduce_sum(t); `t` must stay alive and untouched until wait().
  // Every rank must start a communicator's collectives in the same order. The
  // default reduces at once and returns a finished handle.
  virtual std::unique_ptr<PendingCollective> start_all_reduce_sum(at::Tensor& t);
  // The sum over ranks of `t`, of which this rank gets its block of dim 0: rows
  // [rank*k, (rank+1)*k) for k = t.size(0) / size(), which must divide evenly.
  // bf16/fp16 as all_reduce_sum. The default all-reduces a copy and keeps the block.
  virtual at::Tensor reduce_scatter_sum(const at::Tensor& t);
  // Starts reduce_scatter_sum(t) in place: once wait() returns, t's first block
  // (rows [0, k)) holds this rank's block of the sum and the rest of t is
  // undefined; t must stay alive and untouched until then. The default does it
  // at once.
  virtual std::unique_ptr<PendingCollective> start_reduce_scatter_sum(at::Tensor& t);
  // Concatenation along dim 0 of every rank's tensor (all must have equal shapes).
  virtual at::Tensor all_gather(const at::Tensor& t) = 0;
  // all_gather's result on `root` only (an undefined tensor on the other ranks),
  // which alone holds the whole. The default all-gathers.
  virtual at::Tensor gather(const at::Tensor& t, int root);
  // Sends rows [sum(send_rows[:p]), sum(send_rows[:p+1])) of `send` (dim 0) to
  // rank p and returns the rows received, ordered by source rank. recv_rows[p]
  // must equal what rank p sends here. Any dtype; zero-row splits are fine.
  virtual at::Tensor all_to_all_v(const at::Tensor& send, const std::vector<int64_t>& send_rows,
                                  const std::vector<int64_t>& recv_rows) = 0;
  // In place: every rank ends with root's values (shapes and dtypes must agree).
  virtual void broadcast(at::Tensor& t, int root) = 0;
  virtual void barrier() = 0;
  // "mpi", "nccl", or "local" (a world of one without MPI).
  virtual std::string backend() const = 0;
};

}  // namespace moelab
