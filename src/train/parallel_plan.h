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

#include "comm/process_groups.h"
#include "config/config.h"
#include "model/transformer.h"
#include "train/grad_sync.h"
#include "train/optimizer.h"

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

  // Call before the backward pass of a step's last micro-batch: with
  // parallel.overlap_grad_sync its gradients start their exchange as they come.
  void before_last_backward();
  // Averages every gradient over the ranks that hold its parameter.
  void sync_gradients();
  // The global squared gradient norm after sync_gradients(), a 0-dim double on
  // `device` (not read back): replicated gradients are equal on every rank;
  // the experts of one EP group are disjoint, so their squares add over it.
  torch::Tensor grad_sq_norm(const torch::Device& device) const;
  // Scales every gradient for the global norm `norm` (grad_clip.h's rule).
  void clip_gradients(double norm, double max_norm) const;

 private:
  ProcessGroups groups_;
  bool global_stats_;
  bool overlap_;
  NamedParams all_, replicated_, experts_;
  std::unique_ptr<GradSync> replicated_sync_, expert_sync_;
};

}  // namespace moelab
