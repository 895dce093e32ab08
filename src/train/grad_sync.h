// Data-parallel gradient averaging. Replicated (non-expert) gradients are
// summed over all ranks; expert gradients over the ranks holding the same
// experts (each expert already received the gradients of every token sent to it
// from its expert-parallel group). Both are divided by the world size, so the
// update is the gradient of the mean loss over the global batch at every layout.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <vector>

#include "comm/communicator.h"

namespace moelab {

class GradSync {
 public:
  GradSync(std::vector<torch::Tensor> params, std::shared_ptr<Communicator> group, double divisor,
           int64_t bucket_bytes = 32 << 20);

  // All-reduces the gradients in flat buckets (few large messages instead of one
  // per tensor) and divides them by the divisor.
  void sync();

  const std::vector<torch::Tensor>& params() const { return params_; }

 private:
  std::vector<torch::Tensor> params_;
  std::shared_ptr<Communicator> group_;
  double divisor_;
  std::vector<std::vector<size_t>> buckets_;  // indices into params_
};

}  // namespace moelab
