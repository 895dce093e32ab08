// The one place where parallelism is applied to a model and its gradients, in
// the spirit of torchtitan's parallelize_*: the step itself has no data- or
// expert-parallel branches, and the plan none per kind of parameter (it loops
// over ParamGroups). Data parallel: every non-expert parameter is
// replicated on all ranks and its gradient averaged over them. Expert parallel:
// each EP group splits the experts (tokens reach them through the all-to-all
// dispatcher) and an expert's gradient is averaged over the ranks that hold it
// (its expert-data-parallel group). Both divide by the world size, so an update
// is the gradient of the mean loss over the global batch at every layout.
#pragma once

#include <torch/torch.h>

#include <memory>

#include "comm/process_groups.h"
#include "config/config.h"
#include "model/named_params.h"
#include "model/transformer.h"
#include "parallel/param_group.h"

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

  // Sorts the model's parameters into the replicated group and the expert
  // group (param_group.h) and prepares their gradient exchange. Call once,
  // after the model is on its device.
  void parallelize(Transformer& model);

  const NamedParams& parameters() const { return all_; }
  // The replicated parameters first, then this rank's experts.
  const std::vector<ParamGroup>& param_groups() const { return param_groups_; }
  const ParamGroup& replicated() const { return param_groups_[0]; }
  const ParamGroup& experts() const { return param_groups_[1]; }
  // The model's stacked expert parameters and the per-expert names of their
  // rows (checkpoints hold one tensor per expert).
  const StackedParams& stacked_parameters() const { return stacked_; }

  // Call before the backward pass of a step's last micro-batch: with
  // parallel.overlap_grad_sync its gradients start their exchange as they come.
  void before_last_backward();
  // Averages every gradient over the ranks that hold its parameter, as far as
  // this rank's optimizer shard needs it (param_group.h), which the norm,
  // clipping and step below read.
  void sync_gradients();
  // The global squared gradient norm after sync_gradients(), a 0-dim double on
  // `device` (not read back): every group's share, summed over the world.
  torch::Tensor grad_sq_norm(const torch::Device& device) const;
  // Scales every gradient for the global norm `norm` (grad_clip.h's rule).
  void clip_gradients(double norm, double max_norm) const;

  // What this rank's optimizer steps, split by weight decay (train/optimizer.h's
  // make_adamw): its shard of every parameter (the whole parameter unless
  // parallel.shard_optimizer), which decays as its parameter does. Call after
  // parallelize().
  struct SteppedTensors {
    std::vector<torch::Tensor> decayed, not_decayed;
  };
  SteppedTensors stepped_tensors() const;
  // The update after sync_gradients(): AdamW on this rank's shards, then the
  // updated shards gathered into the parameters (collective when sharded).
  void optimizer_step(torch::optim::AdamW& optimizer) const;
  // Bytes of AdamW's two moments on this rank once it has stepped.
  int64_t optimizer_state_bytes() const;

  // Every group's parts of a checkpoint (ParamGroup::parts_to_save): what
  // this rank writes.
  TensorParts parts_to_save(const torch::optim::AdamW& optimizer) const;
  // What this rank reads on resume: every parameter it holds, and its shards'
  // AdamW state into `state` for load_optimizer_state().
  TensorParts parts_to_load(TensorMap& state) const;
  void load_optimizer_state(torch::optim::AdamW& optimizer, const TensorMap& state) const;

 private:
  ProcessGroups groups_;
  bool global_stats_;
  ParamGroupOptions group_options_;
  NamedParams all_;
  StackedParams stacked_;
  std::vector<ParamGroup> param_groups_;
};

}  // namespace moelab
