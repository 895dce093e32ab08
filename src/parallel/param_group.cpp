#include "parallel/param_group.h"

#include "comm/local_communicator.h"
#include "parallel/grad_clip.h"

namespace moelab {
namespace {

std::vector<torch::Tensor> tensors(const NamedParams& named) {
  std::vector<torch::Tensor> out;
  for (const auto& [name, p] : named) out.push_back(p);
  return out;
}

}  // namespace

ParamGroup::ParamGroup(NamedParams params, std::shared_ptr<Communicator> group,
                       const ParamGroupOptions& options)
    : params_(std::move(params)),
      group_(std::move(group)),
      shard_group_(options.shard_optimizer ? group_ : std::make_shared<LocalCommunicator>()),
      shards_(std::make_unique<OptimizerShards>(params_, shard_group_)) {
  const GradReduction reduction =
      shard_group_->size() > 1 ? GradReduction::kReduceScatter : GradReduction::kAllReduce;
  sync_ = std::make_unique<GradSync>(tensors(params_), group_, options.divisor, options.overlap,
                                     options.bucket_bytes, reduction);
}

torch::Tensor ParamGroup::grad_sq_norm(const torch::Device& device) const {
  // The ranks of the group hold group size / shard size copies of each shard;
  // the first shard_group_->size() ranks hold one each.
  if (group_->rank() >= shard_group_->size()) {
    return torch::zeros({}, torch::TensorOptions(torch::kDouble).device(device));
  }
  return grad_sq_norm_tensor(shards_->gradient_slices(), device);
}

void ParamGroup::clip_gradients(double norm, double max_norm) const {
  clip_to_norm(shards_->gradient_slices(), norm, max_norm);
}

void ParamGroup::after_step() const {
  shards_->detach_gradients();
  shards_->gather_parameters();
}

int64_t ParamGroup::optimizer_state_bytes() const {
  int64_t bytes = 0;
  for (const auto& [name, slice] : shards_->slices()) {
    bytes += 2 * slice.numel() * int64_t(slice.element_size());
  }
  return bytes;
}

}  // namespace moelab
