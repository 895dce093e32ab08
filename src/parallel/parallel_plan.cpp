#include "parallel/parallel_plan.h"

#include "model/all_to_all_dispatcher.h"
#include "parallel/grad_clip.h"

namespace moelab {
namespace {

std::vector<torch::Tensor> tensors(const NamedParams& named) {
  std::vector<torch::Tensor> out;
  for (const auto& [name, p] : named) out.push_back(p);
  return out;
}

}  // namespace

ParallelPlan::ParallelPlan(ProcessGroups groups, const Config& cfg)
    : groups_(std::move(groups)),
      global_stats_(cfg.moe.enabled && cfg.moe.stats == BalanceStats::kGlobal),
      overlap_(cfg.parallel.overlap_grad_sync),
      shard_optimizer_(cfg.parallel.shard_optimizer) {}

MoeContext ParallelPlan::moe_context() const {
  MoeContext ctx;
  if (groups_.ep_size > 1) {
    auto ep = groups_.ep;
    const auto placement = groups_.placement;
    ctx.make_dispatcher = [ep, placement](int64_t) {
      return std::make_shared<AllToAllDispatcher>(ep, placement);
    };
  }
  if (global_stats_ && groups_.dp->size() > 1) {
    auto dp = groups_.dp;
    ctx.reduce_mean = [dp](const torch::Tensor& t) {
      auto sum = t.detach().clone();
      dp->all_reduce_sum(sum);
      return sum / double(dp->size());
    };
  }
  return ctx;
}

void ParallelPlan::parallelize(Transformer& model) {
  for (auto& np : model->named_parameters()) {
    (model->is_expert_parameter(np.key()) ? experts_ : replicated_)
        .emplace_back(np.key(), np.value());
    all_.emplace_back(np.key(), np.value());
  }
  stacked_ = model->stacked_params();
  const double world = groups_.world->size();
  // Sharded, a rank needs the average of its slices only.
  const GradReduction reduction =
      shard_optimizer_ ? GradReduction::kReduceScatter : GradReduction::kAllReduce;
  const int64_t bucket_bytes = 4 << 20;
  replicated_sync_ = std::make_unique<GradSync>(tensors(replicated_), groups_.dp, world, overlap_,
                                                bucket_bytes, reduction);
  expert_sync_ = std::make_unique<GradSync>(tensors(experts_), groups_.expert_dp, world, overlap_,
                                            bucket_bytes, reduction);
  if (shard_optimizer_) {
    replicated_shards_ = std::make_unique<OptimizerShards>(replicated_, groups_.dp);
    expert_shards_ = std::make_unique<OptimizerShards>(experts_, groups_.expert_dp);
  }
}

void ParallelPlan::before_last_backward() {
  replicated_sync_->arm();
  expert_sync_->arm();
}

void ParallelPlan::sync_gradients() {
  replicated_sync_->sync();
  expert_sync_->sync();
}

torch::Tensor ParallelPlan::grad_sq_norm(const torch::Device& device) const {
  if (shard_optimizer_) {
    // Every element's average lives in exactly one rank's slice: the squares
    // of all slices add up over the world.
    auto sq = grad_sq_norm_tensor(replicated_shards_->gradient_slices(), device) +
              grad_sq_norm_tensor(expert_shards_->gradient_slices(), device);
    groups_.world->all_reduce_sum(sq);
    return sq;
  }
  auto expert_sq = local_grad_sq_norm_tensor(expert_sync_->params(), device);
  if (groups_.ep_size > 1) groups_.ep->all_reduce_sum(expert_sq);
  return local_grad_sq_norm_tensor(replicated_sync_->params(), device) + expert_sq;
}

void ParallelPlan::clip_gradients(double norm, double max_norm) const {
  if (shard_optimizer_) {
    clip_to_norm(replicated_shards_->gradient_slices(), norm, max_norm);
    clip_to_norm(expert_shards_->gradient_slices(), norm, max_norm);
    return;
  }
  clip_grads_to_norm(replicated_sync_->params(), norm, max_norm);
  clip_grads_to_norm(expert_sync_->params(), norm, max_norm);
}

ParallelPlan::SteppedTensors ParallelPlan::stepped_tensors() const {
  SteppedTensors out;
  if (!shard_optimizer_) {
    for (const auto& [name, p] : all_) (p.dim() >= 2 ? out.decayed : out.not_decayed).push_back(p);
    return out;
  }
  for (const auto* shards : {replicated_shards_.get(), expert_shards_.get()}) {
    for (size_t i = 0; i < shards->slices().size(); ++i) {
      (shards->is_matrix()[i] ? out.decayed : out.not_decayed)
          .push_back(shards->slices()[i].second);
    }
  }
  return out;
}

void ParallelPlan::optimizer_step(torch::optim::AdamW& optimizer) const {
  if (!shard_optimizer_) {
    optimizer.step();
    return;
  }
  replicated_shards_->attach_gradients();
  expert_shards_->attach_gradients();
  optimizer.step();
  replicated_shards_->detach_gradients();
  expert_shards_->detach_gradients();
  replicated_shards_->gather_parameters();
  expert_shards_->gather_parameters();
}

TensorMap ParallelPlan::replicated_optimizer_state(const torch::optim::AdamW& optimizer) const {
  return shard_optimizer_ ? replicated_shards_->gather_state(optimizer)
                          : optimizer_state_tensors(optimizer, replicated_);
}

TensorMap ParallelPlan::expert_optimizer_state(const torch::optim::AdamW& optimizer) const {
  return shard_optimizer_ ? expert_shards_->gather_state(optimizer)
                          : optimizer_state_tensors(optimizer, experts_);
}

int64_t ParallelPlan::optimizer_state_bytes() const {
  int64_t bytes = 0;
  const auto add = [&](const NamedParams& params) {
    for (const auto& [name, p] : params) bytes += 2 * p.numel() * int64_t(p.element_size());
  };
  if (shard_optimizer_) {
    add(replicated_shards_->slices());
    add(expert_shards_->slices());
  } else {
    add(all_);
  }
  return bytes;
}

void ParallelPlan::load_optimizer_state(torch::optim::AdamW& optimizer,
                                        const TensorMap& full) const {
  if (!shard_optimizer_) {
    moelab::load_optimizer_state(optimizer, all_, full);
    return;
  }
  for (const auto* shards : {replicated_shards_.get(), expert_shards_.get()}) {
    moelab::load_optimizer_state(optimizer, shards->slices(), shards->slice_state(full));
  }
}

}  // namespace moelab
