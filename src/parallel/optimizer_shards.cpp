#include "parallel/optimizer_shards.h"

#include "parallel/shard_range.h"

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

void OptimizerShards::gather_parameters() const {
  if (group_->size() == 1 || params_.empty()) return;  // one rank: the slices are the parameters
  torch::NoGradGuard no_grad;
  const int64_t ranks = group_->size();
  for (size_t b = 0; b < buckets_.size(); ++b) {
    const size_t end = b + 1 < buckets_.size() ? buckets_[b + 1].first : slices_.size();
    const int64_t numel = buckets_[b].numel;
    // Padding lies past every parameter's last element, so it may hold anything.
    torch::Tensor flat = torch::empty({numel}, slices_[0].second.options());
    for (size_t i = buckets_[b].first; i < end; ++i) {
      flat.narrow(0, layout_[i].offset, slices_[i].second.numel()).copy_(slices_[i].second);
    }
    // Row q holds rank q's chunks; a parameter's elements are its column block, row by row.
    const torch::Tensor rows = group_->all_gather(flat).view({ranks, numel});
    for (size_t i = buckets_[b].first; i < end; ++i) {
      const Layout& l = layout_[i];
      params_[i].second.detach().view(-1).copy_(
          rows.narrow(1, l.offset, l.chunk).reshape(-1).narrow(0, 0, l.numel));
    }
  }
}

}  // namespace moelab
