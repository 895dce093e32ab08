// ZeRO-1 (parallel.shard_optimizer): AdamW steps only this rank's slice of each
// parameter, so the moments of a parameter replicated on N ranks take 1/N of
// their memory on each. The slice of rank r is a view of the parameter's
// flattened elements shard_range.h gives it. The gradient exchange
// reduce-scatters (grad_sync.h), so a rank receives the averaged gradient of its
// slices only; AdamW is element-wise, so every element gets the update it would
// get unsharded. After the step the ranks' updated slices are all-gathered back
// into the full parameters (one collective per bucket). Each rank checkpoints its own
// slices' moments (ParamGroup::parts_to_save) and reads back the range its slices need, so
// checkpoints resume at any layout, sharded or not.
#pragma once

#include <torch/torch.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "model/named_params.h"

namespace moelab {

using TensorMap = std::map<std::string, torch::Tensor>;

class OptimizerShards {
 public:
  // `params` are replicated over `group`: each rank of it holds the same values.
  // Updated slices are gathered in buckets of about `bucket_elements` slice
  // elements: the gathered buffer, group size times that, is the temporary
  // memory a step needs beyond unsharded training.
  OptimizerShards(const NamedParams& params, std::shared_ptr<Communicator> group,
                  int64_t bucket_elements = int64_t{1} << 20);

  // This rank's slice of each parameter (a 1-D view, possibly empty), by the
  // parameter's name, in the order of `params`.
  const NamedParams& slices() const { return slices_; }
  // Where slice i begins in its parameter's flattened elements.
  int64_t slice_begin(size_t i) const { return layout_[i].begin; }
  // Whether each parameter (in the same order) is a matrix: AdamW's weight
  // decay follows the parameter's shape, not its slice's.
  const std::vector<bool>& is_matrix() const { return is_matrix_; }

  // Each slice's part of its parameter's gradient (a view; undefined where the
  // parameter has none), where the reduce-scatter left the average.
  std::vector<torch::Tensor> gradient_slices() const;
  // Points each slice's gradient at gradient_slices(), for the step.
  void attach_gradients() const;
  // Lets go of them after the step, so the step's gradients are freed when the
  // model's are reset rather than living through the next backward.
  void detach_gradients() const;
  // Collective: every rank's updated slices into the full parameters.
  void gather_parameters() const;

 private:
  struct Layout {
    int64_t numel = 0;   // of the parameter
    int64_t chunk = 0;   // ceil(numel / group size): every rank's slice, padded
    int64_t begin = 0;   // this rank's first element
    int64_t offset = 0;  // of the chunk in its bucket's buffer
  };
  // Consecutive parameters whose padded slices are gathered in one collective.
  struct Bucket {
    size_t first = 0;   // parameter index
    int64_t numel = 0;  // elements of the chunks it holds
  };
  NamedParams params_, slices_;
  std::vector<Layout> layout_;
  std::vector<Bucket> buckets_;
  std::vector<bool> is_matrix_;
  std::shared_ptr<Communicator> group_;
};

}  // namespace moelab
