// The collectives moelab needs, independent of the transport. One instance
// stands for one group of ranks (world, an expert-parallel group, ...); every
// rank of the group must call the same collectives in the same order.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

namespace moelab {

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  // In place; bf16/fp16 are reduced in fp32 and rounded back once.
  virtual void all_reduce_sum(torch::Tensor& t) = 0;
  virtual void all_reduce_max(torch::Tensor& t) = 0;
  // Concatenation along dim 0 of every rank's tensor (all must have equal shapes).
  virtual torch::Tensor all_gather(const torch::Tensor& t) = 0;
  // Sends rows [sum(send_rows[:p]), sum(send_rows[:p+1])) of `send` (dim 0) to
  // rank p and returns the rows received, ordered by source rank. recv_rows[p]
  // must equal what rank p sends here. Any dtype; zero-row splits are fine.
  virtual torch::Tensor all_to_all_v(const torch::Tensor& send,
                                     const std::vector<int64_t>& send_rows,
                                     const std::vector<int64_t>& recv_rows) = 0;
  // In place: every rank ends with root's values (shapes and dtypes must agree).
  virtual void broadcast(torch::Tensor& t, int root) = 0;
  virtual void barrier() = 0;
  // "mpi", "nccl", or "local" (a world of one without MPI).
  virtual std::string backend() const = 0;
};

}  // namespace moelab
