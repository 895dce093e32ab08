#include "parallel/optimizer_shards.h"

#include "parallel/shard_range.h"
#include "util/error.h"

namespace moelab {

OptimizerShards::OptimizerShards(const NamedParams& params, std::shared_ptr<Communicator> group,
                                 int64_t bucket_elements)
    : params_(params), group_(std::move(group)) {
  const int64_t ranks = group_->size();
  const int64_t rank = group_->rank();
  for (const auto& [name, p] : params_) {
    TORCH_CHECK(p.is_contiguous(), "sharded parameter '", name, "' must be contiguous");
    const ShardRange range = shard_range(p.numel(), ranks, rank);
    Layout l;
    l.numel = p.numel();
    l.chunk = range.chunk;
    l.begin = range.begin;
    if (buckets_.empty() || buckets_.back().numel + l.chunk > bucket_elements) {
      buckets_.push_back({slices_.size(), 0});
    }
    l.offset = buckets_.back().numel;
    buckets_.back().numel += l.chunk;
    slices_.emplace_back(name, p.detach().view(-1).narrow(0, l.begin, range.length));
    layout_.push_back(l);
    is_matrix_.push_back(p.dim() >= 2);
  }
}

std::vector<torch::Tensor> OptimizerShards::gradient_slices() const {
  std::vector<torch::Tensor> out;
  for (size_t i = 0; i < params_.size(); ++i) {
    const torch::Tensor& grad = params_[i].second.grad();
    out.push_back(grad.defined()
                      ? grad.view(-1).narrow(0, layout_[i].begin, slices_[i].second.numel())
                      : grad);
  }
  return out;
}

void OptimizerShards::attach_gradients() const {
  const std::vector<torch::Tensor> grads = gradient_slices();
  for (size_t i = 0; i < slices_.size(); ++i) {
    torch::Tensor slice = slices_[i].second;
    slice.mutable_grad() = grads[i];
  }
}

void OptimizerShards::detach_gradients() const {
  for (const auto& [name, slice] : slices_) {
    torch::Tensor s = slice;
    s.mutable_grad() = torch::Tensor();
  }
}

void OptimizerShards::gather(const std::vector<torch::Tensor>& slices,
                             const std::function<void(size_t, const torch::Tensor&)>& take,
                             GatherTo to) const {
  const int64_t ranks = group_->size();
  for (size_t b = 0; b < buckets_.size(); ++b) {
    const size_t end = b + 1 < buckets_.size() ? buckets_[b + 1].first : slices.size();
    const int64_t numel = buckets_[b].numel;
    // Padding lies past every parameter's last element, so it may hold anything.
    torch::Tensor flat = torch::empty({numel}, slices[0].options());
    for (size_t i = buckets_[b].first; i < end; ++i) {
      flat.narrow(0, layout_[i].offset, slices[i].numel()).copy_(slices[i].reshape(-1));
    }
    const torch::Tensor gathered =
        to == GatherTo::kEveryRank ? group_->all_gather(flat) : group_->gather(flat, 0);
    if (!gathered.defined()) continue;
    // Row q holds rank q's chunks; a parameter's elements are its column block, row by row.
    const torch::Tensor rows = gathered.view({ranks, numel});
    for (size_t i = buckets_[b].first; i < end; ++i) {
      const Layout& l = layout_[i];
      take(i, rows.narrow(1, l.offset, l.chunk).reshape(-1).narrow(0, 0, l.numel));
    }
  }
}

void OptimizerShards::gather_parameters() const {
  if (group_->size() == 1 || params_.empty()) return;  // one rank: the slices are the parameters
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> slices;
  for (const auto& [name, s] : slices_) slices.push_back(s);
  gather(
      slices,
      [&](size_t i, const torch::Tensor& full) { params_[i].second.detach().view(-1).copy_(full); },
      GatherTo::kEveryRank);
}

TensorMap OptimizerShards::gather_state(const torch::optim::AdamW& optimizer) const {
  TensorMap local = optimizer_state_tensors(optimizer, slices_);
  if (group_->size() == 1) {  // each slice is its whole parameter: only the shape differs
    for (const auto& [name, p] : params_) {
      for (const char* field : {"exp_avg", "exp_avg_sq"}) {
        torch::Tensor& moment = local.at(optimizer_state_name(name, field));
        moment = moment.view(p.sizes());
      }
    }
    return local;
  }
  TensorMap full;
  for (const char* field : {"exp_avg", "exp_avg_sq"}) {
    std::vector<torch::Tensor> slices;
    for (const auto& [name, s] : slices_)
      slices.push_back(local.at(optimizer_state_name(name, field)));
    if (slices.empty()) continue;
    gather(
        slices,
        [&](size_t i, const torch::Tensor& gathered) {
          const auto& [name, p] = params_[i];
          full[optimizer_state_name(name, field)] = gathered.view(p.sizes()).clone();
        },
        GatherTo::kFirstRank);
  }
  if (group_->rank() != 0) return full;
  // Every slice of a parameter is stepped together, so the counts agree; an
  // empty slice's count is as good as any.
  for (const auto& [name, s] : slices_) {
    full[optimizer_state_name(name, "step")] = local.at(optimizer_state_name(name, "step"));
  }
  return full;
}

TensorMap OptimizerShards::slice_state(const TensorMap& full) const {
  TensorMap out;
  for (size_t i = 0; i < params_.size(); ++i) {
    const auto& [name, p] = params_[i];
    for (const char* field : {"exp_avg", "exp_avg_sq"}) {
      const auto it = full.find(optimizer_state_name(name, field));
      if (it == full.end()) continue;  // load_optimizer_state names what is missing
      if (it->second.sizes() != p.sizes()) {
        throw InputError("optimizer state '" + it->first + "' has shape " +
                         c10::str(it->second.sizes()) + " but the parameter has shape " +
                         c10::str(p.sizes()));
      }
      out[it->first] =
          it->second.reshape(-1).narrow(0, layout_[i].begin, slices_[i].second.numel());
    }
    const auto step = full.find(optimizer_state_name(name, "step"));
    if (step != full.end()) out[step->first] = step->second;
  }
  return out;
}

}  // namespace moelab
