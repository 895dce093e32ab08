#include "parallel/param_group.h"

#include "checkpoint/optimizer_state.h"
#include "comm/local_communicator.h"
#include "parallel/grad_clip.h"
#include "parallel/shard_range.h"

namespace moelab {
namespace {

const char* const kMoments[] = {"exp_avg", "exp_avg_sq"};

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

TensorParts ParamGroup::parts_to_save(const torch::optim::AdamW& optimizer) const {
  const auto state = optimizer_state_tensors(optimizer, shards_->slices());
  TensorParts parts;
  for (size_t i = 0; i < params_.size(); ++i) {
    const auto& [name, p] = params_[i];
    const std::vector<int64_t> shape(p.sizes().begin(), p.sizes().end());
    const ShardRange mine = shard_range(p.numel(), group_->size(), group_->rank());
    parts.push_back(part_of(name, p, mine.begin, mine.length));
    // This rank's shard holds at least its range: all of it unsharded.
    const int64_t offset = mine.begin - shards_->slice_begin(i);
    for (const char* field : kMoments) {
      const std::string key = optimizer_state_name(name, field);
      parts.push_back({key, shape, mine.begin, state.at(key).narrow(0, offset, mine.length)});
    }
    if (group_->rank() == 0) {
      const std::string key = optimizer_state_name(name, "step");
      parts.push_back({key, {}, 0, state.at(key).view(-1)});
    }
  }
  return parts;
}

TensorParts ParamGroup::parts_to_load(TensorMap& state) const {
  TensorParts parts;
  for (size_t i = 0; i < params_.size(); ++i) {
    const auto& [name, p] = params_[i];
    const std::vector<int64_t> shape(p.sizes().begin(), p.sizes().end());
    parts.push_back(whole_part(name, p));
    const torch::Tensor& slice = shards_->slices()[i].second;
    for (const char* field : kMoments) {
      const std::string key = optimizer_state_name(name, field);
      state[key] = torch::empty_like(slice);
      parts.push_back({key, shape, shards_->slice_begin(i), state[key]});
    }
    const std::string key = optimizer_state_name(name, "step");
    state[key] = torch::zeros({}, torch::kLong);
    parts.push_back({key, {}, 0, state[key].view(-1)});
  }
  return parts;
}

void ParamGroup::load_state(torch::optim::AdamW& optimizer, const TensorMap& state) const {
  load_optimizer_state(optimizer, shards_->slices(), state);
}

}  // namespace moelab
