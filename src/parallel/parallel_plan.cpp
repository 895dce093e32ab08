#include "parallel/parallel_plan.h"

#include "model/all_to_all_dispatcher.h"

namespace moelab {

ParallelPlan::ParallelPlan(ProcessGroups groups, const Config& cfg)
    : groups_(std::move(groups)),
      global_stats_(cfg.moe.enabled && cfg.moe.stats == BalanceStats::kGlobal) {
  group_options_.shard_optimizer = cfg.parallel.shard_optimizer;
  group_options_.overlap = cfg.parallel.overlap_grad_sync;
  group_options_.divisor = groups_.world->size();
}

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
  NamedParams replicated, experts;
  for (auto& np : model->named_parameters()) {
    (model->is_expert_parameter(np.key()) ? experts : replicated)
        .emplace_back(np.key(), np.value());
    all_.emplace_back(np.key(), np.value());
  }
  stacked_ = model->stacked_params();
  param_groups_.reserve(2);
  param_groups_.emplace_back(std::move(replicated), groups_.dp, group_options_);
  param_groups_.emplace_back(std::move(experts), groups_.expert_dp, group_options_);
}

void ParallelPlan::before_last_backward() {
  for (auto& group : param_groups_) group.arm();
}

void ParallelPlan::sync_gradients() {
  for (auto& group : param_groups_) group.sync_gradients();
}

torch::Tensor ParallelPlan::grad_sq_norm(const torch::Device& device) const {
  auto sq = torch::zeros({}, torch::TensorOptions(torch::kDouble).device(device));
  for (const auto& group : param_groups_) sq += group.grad_sq_norm(device);
  groups_.world->all_reduce_sum(sq);
  return sq;
}

void ParallelPlan::clip_gradients(double norm, double max_norm) const {
  for (const auto& group : param_groups_) group.clip_gradients(norm, max_norm);
}

ParallelPlan::SteppedTensors ParallelPlan::stepped_tensors() const {
  SteppedTensors out;
  for (const auto& group : param_groups_) {
    const OptimizerShards& shards = group.shards();
    for (size_t i = 0; i < shards.slices().size(); ++i) {
      (shards.is_matrix()[i] ? out.decayed : out.not_decayed).push_back(shards.slices()[i].second);
    }
  }
  return out;
}

void ParallelPlan::optimizer_step(torch::optim::AdamW& optimizer) const {
  for (const auto& group : param_groups_) group.before_step();
  optimizer.step();
  for (const auto& group : param_groups_) group.after_step();
}

TensorParts ParallelPlan::parts_to_save(const torch::optim::AdamW& optimizer) const {
  TensorParts parts;
  for (const auto& group : param_groups_) {
    for (auto& part : group.parts_to_save(optimizer)) parts.push_back(std::move(part));
  }
  return parts;
}

TensorParts ParallelPlan::parts_to_load(TensorMap& state) const {
  TensorParts parts;
  for (const auto& group : param_groups_) {
    for (auto& part : group.parts_to_load(state)) parts.push_back(std::move(part));
  }
  return parts;
}

void ParallelPlan::load_optimizer_state(torch::optim::AdamW& optimizer,
                                        const TensorMap& state) const {
  for (const auto& group : param_groups_) group.load_state(optimizer, state);
}

int64_t ParallelPlan::optimizer_state_bytes() const {
  int64_t bytes = 0;
  for (const auto& group : param_groups_) bytes += group.optimizer_state_bytes();
  return bytes;
}

}  // namespace moelab
