// One kind of parameter and the ranks that hold it: the replicated parameters
// over the data-parallel group, a rank's experts over their expert-data-parallel
// group. ParallelPlan keeps one ParamGroup per kind and loops over them, so each
// operation below is written once for every kind.
//
// A group's gradients are averaged over `group` (GradSync). Its optimizer steps
// this rank's shard of each parameter (OptimizerShards): with
// parallel.shard_optimizer the shard is over every rank of `group` (ZeRO-1),
// otherwise over this rank alone, so the shard is the whole parameter and the
// same code steps it. The gradient exchange delivers what the shard needs: the
// average of this rank's range (reduce-scatter) or of everything (all-reduce).
#pragma once

#include <torch/torch.h>

#include <memory>
#include <vector>

#include "checkpoint/tensor_parts.h"
#include "comm/communicator.h"
#include "model/named_params.h"
#include "parallel/grad_sync.h"
#include "parallel/optimizer_shards.h"

namespace moelab {

struct ParamGroupOptions {
  bool shard_optimizer = false;
  bool overlap = false;  // parallel.overlap_grad_sync
  double divisor = 1;    // the world size: gradients are of the mean loss
  int64_t bucket_bytes = 4 << 20;
};

class ParamGroup {
 public:
  ParamGroup(NamedParams params, std::shared_ptr<Communicator> group,
             const ParamGroupOptions& options);

  const NamedParams& params() const { return params_; }
  const OptimizerShards& shards() const { return *shards_; }
  // The ranks this group's parameters are replicated over.
  Communicator& group() const { return *group_; }

  void arm() { sync_->arm(); }
  void sync_gradients() { sync_->sync(); }
  // This rank's share of the global squared gradient norm, a 0-dim double on
  // `device`: the squares of its shard's averaged gradients, counted on one of
  // the ranks holding the same shard only, so a sum over the world counts
  // every element once.
  torch::Tensor grad_sq_norm(const torch::Device& device) const;
  void clip_gradients(double norm, double max_norm) const;
  // Around the optimizer's step: points the shards at their gradients, then
  // lets go of them and gathers the updated shards into the parameters.
  void before_step() const { shards_->attach_gradients(); }
  void after_step() const;
  // Bytes of AdamW's two moments for this rank's shards.
  int64_t optimizer_state_bytes() const;

  // What this rank writes of the group to a checkpoint: its range (shard_range
  // over the group) of every parameter and of its AdamW moments, and the step
  // counts on the group's first rank, so the group's ranks write every element
  // once, sharded or not. Views of the live tensors.
  TensorParts parts_to_save(const torch::optim::AdamW& optimizer) const;
  // What it reads on resume: every parameter whole (each rank of the group
  // holds it), and its shards' AdamW state into tensors made in `state`, which
  // load_state() then hands to the optimizer.
  TensorParts parts_to_load(TensorMap& state) const;
  void load_state(torch::optim::AdamW& optimizer, const TensorMap& state) const;

 private:
  NamedParams params_;
  std::shared_ptr<Communicator> group_;
  std::shared_ptr<Communicator> shard_group_;
  std::unique_ptr<OptimizerShards> shards_;
  std::unique_ptr<GradSync> sync_;
};

}  // namespace moelab
