// The one place where parallelism is applied to a model and its gradients, in
// the spirit of torchtitan's parallelize_*: the step itself has no data- or
// expert-parallel branches. Data parallel: every non-expert parameter is
// replicated on all ranks and its gradient averaged over them. Expert parallel:
// each EP group splits the experts (tokens reach them through the all-to-all
// dispatcher) and an expert's gradient is averaged over the ranks that hold it
// (its expert-data-parallel group). Both divide by the world size, so an update
// is the gradient of the mean loss over the global batch at every layout.
#pragma once

#include <torch/torch.h>

#include <memory>

#include "checkpoint/optimizer_state.h"
#include "comm/process_groups.h"
#include "config/config.h"
#include "model/named_params.h"
#include "model/transformer.h"
#include "parallel/grad_sync.h"
#include "parallel/optimizer_shards.h"

namespace moelab {

class ParallelPlan {
 public:
  ParallelPlan(ProcessGroups groups, const Config& cfg);

  const ProcessGroups& groups() const { return groups_; }
  // Every rank over MPI with CPU tensors: host-side values and error agreement.
  Communicator& control() const { return *groups_.control; }

  // How MoE layers reach other ranks: the all-to-all dispatcher when ep > 1,
  // and router statistics averaged over the data-parallel ranks when
  // moe.stats = "global". Pass it to the model's constructor.
  MoeContext moe_context() const;

  // Sorts the model's parameters into replicated and expert ones and prepares
  // their gradient exchange. Call once, after the model is on its device.
  void parallelize(Transformer& model);

  const NamedParams& parameters() const { return all_; }
  const NamedParams& replicated_parameters() const { return replicated_; }
  const NamedParams& expert_parameters() const { return experts_; }
  // The model's stacked expert parameters and the per-expert names of their
  // rows (checkpoints hold one tensor per expert).
  const StackedParams& stacked_parameters() const { return stacked_; }

  // Call before the backward pass of a step's last micro-batch: with
  // parallel.overlap_grad_sync its gradients start their exchange as they come.
  void before_last_backward();
  // Averages every gradient over the ranks that hold its parameter. With
  // parallel.shard_optimizer, a rank gets the average of its slices only
  // (reduce-scatter), which the norm, clipping and step below read.
  void sync_gradients();
  // The global squared gradient norm after sync_gradients(), a 0-dim double on
  // `device` (not read back): replicated gradients are equal on every rank;
  // the experts of one EP group are disjoint, so their squares add over it.
  torch::Tensor grad_sq_norm(const torch::Device& device) const;
  // Scales every gradient for the global norm `norm` (grad_clip.h's rule).
  void clip_gradients(double norm, double max_norm) const;

  // What this rank's optimizer steps, split by weight decay (train/optimizer.h's
  // make_adamw): every parameter, or with parallel.shard_optimizer its slices of
  // them (optimizer_shards.h), which decay as their parameters do. Call after
  // parallelize().
  struct SteppedTensors {
    std::vector<torch::Tensor> decayed, not_decayed;
  };
  SteppedTensors stepped_tensors() const;
  // The update after sync_gradients(): AdamW on this rank's part, and when
  // sharded the updated parameters gathered from every rank (collective).
  void optimizer_step(torch::optim::AdamW& optimizer) const;
  // The optimizer state of the replicated or of this rank's expert parameters,
  // full-size by parameter name, as a checkpoint holds it. Collective when sharded.
  TensorMap replicated_optimizer_state(const torch::optim::AdamW& optimizer) const;
  TensorMap expert_optimizer_state(const torch::optim::AdamW& optimizer) const;
  // Bytes of AdamW's two moments on this rank once it has stepped.
  int64_t optimizer_state_bytes() const;
  // Loads full-size state (a checkpoint's) into this rank's part of it.
  void load_optimizer_state(torch::optim::AdamW& optimizer, const TensorMap& full) const;

 private:
  ProcessGroups groups_;
  bool global_stats_;
  bool overlap_;
  bool shard_optimizer_;
  NamedParams all_, replicated_, experts_;
  StackedParams stacked_;
  std::unique_ptr<GradSync> replicated_sync_, expert_sync_;
  // With parallel.shard_optimizer: the replicated parameters over the
  // data-parallel group, the experts over their expert-data-parallel group.
  std::unique_ptr<OptimizerShards> replicated_shards_, expert_shards_;
};

}  // namespace moelab
