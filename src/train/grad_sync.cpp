#include "train/grad_sync.h"

namespace moelab {

GradSync::GradSync(std::vector<torch::Tensor> params, std::shared_ptr<Communicator> group,
                   double divisor, int64_t bucket_bytes)
    : params_(std::move(params)), group_(std::move(group)), divisor_(divisor) {
  int64_t filled = 0;
  for (size_t i = 0; i < params_.size(); ++i) {
    const int64_t bytes = params_[i].numel() * params_[i].element_size();
    if (buckets_.empty() || (filled > 0 && filled + bytes > bucket_bytes)) {
      buckets_.emplace_back();
      filled = 0;
    }
    buckets_.back().push_back(i);
    filled += bytes;
  }
}

void GradSync::sync() {
  for (const auto& bucket : buckets_) {
    std::vector<torch::Tensor> grads;
    for (size_t i : bucket) {
      auto& p = params_[i];
      if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
      grads.push_back(p.grad().reshape({-1}));
    }
    torch::Tensor flat = torch::cat(grads);
    if (group_ && group_->size() > 1) group_->all_reduce_sum(flat);
    flat.div_(divisor_);
    int64_t offset = 0;
    for (size_t i : bucket) {
      auto& g = params_[i].mutable_grad();
      g.copy_(flat.narrow(0, offset, g.numel()).view_as(g));
      offset += g.numel();
    }
  }
}

}  // namespace moelab
