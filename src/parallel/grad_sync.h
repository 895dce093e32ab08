// Data-parallel gradient averaging. Replicated (non-expert) gradients are
// summed over all ranks; expert gradients over the ranks holding the same
// experts (each expert already received the gradients of every token sent to it
// from its expert-parallel group). Both are divided by the world size, so the
// update is the gradient of the mean loss over the global batch at every layout.
//
// Overlap: gradients are summed in flat buckets, filled in reverse parameter
// order (the order backward produces them). With overlap on, a bucket's
// all-reduce starts during the last micro-batch's backward as soon as its last
// gradient has been accumulated (a hook on each parameter's gradient
// accumulator), so the exchange runs while backward computes the earlier
// layers; sync() only waits. Buckets start in the same order on every rank (a
// bucket waits for the ones before it), as MPI requires; one whose gradients
// never came (an expert that got no tokens) starts in sync().
//
// Reduce-scatter (for the sharded optimizer): a bucket is laid out as one row
// per rank, row q holding rank q's range of each of its gradients
// (shard_range.h), and reduce-scattered, so each rank receives, and sync()
// writes back, the average of its own ranges only: half the traffic of an
// all-reduce. The rest of each gradient keeps this rank's local values, which
// only the sharded optimizer's slices may follow.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <thread>
#include <vector>

#include "comm/communicator.h"

namespace moelab {

enum class GradReduction { kAllReduce, kReduceScatter };

class GradSync {
 public:
  GradSync(std::vector<torch::Tensor> params, std::shared_ptr<Communicator> group, double divisor,
           bool overlap = false, int64_t bucket_bytes = 4 << 20,
           GradReduction reduction = GradReduction::kAllReduce);
  ~GradSync();
  GradSync(const GradSync&) = delete;
  GradSync& operator=(const GradSync&) = delete;

  // Call before the backward pass whose gradients sync() will exchange (the
  // last micro-batch's): from then on, full buckets start their all-reduce.
  void arm();
  // Starts the buckets not started yet, waits for all, and divides.
  void sync();

  const std::vector<torch::Tensor>& params() const { return params_; }

 private:
  struct Bucket {
    std::vector<size_t> members;  // indices into params_
    size_t waiting = 0;           // gradients not accumulated yet since arm()
    // Each member's first column in a row, and the row's length (all-reduce: one
    // row of whole gradients; reduce-scatter: a row per rank, of their ranges).
    std::vector<int64_t> columns;
    int64_t row_length = 0;
    torch::Tensor flat;  // what is sent (reduce-scatter: row 0 receives this rank's sum)
    std::unique_ptr<PendingCollective> pending;
  };

  void on_gradient(size_t param);
  void start(Bucket& bucket);
  void start_reduce_scatter(Bucket& bucket);
  // Writes a finished bucket's averages into its gradients.
  void finish(Bucket& bucket);

  std::vector<torch::Tensor> params_;
  std::shared_ptr<Communicator> group_;
  double divisor_;
  bool overlap_;
  GradReduction reduction_;
  std::vector<Bucket> buckets_;
  std::vector<size_t> bucket_of_;  // per parameter
  size_t next_to_start_ = 0;
  bool armed_ = false;
  std::thread::id main_thread_ = std::this_thread::get_id();
  std::vector<std::shared_ptr<void>> hooks_;  // keep the gradient accumulators alive
};

}  // namespace moelab
