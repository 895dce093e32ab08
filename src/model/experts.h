// The routed experts this rank holds: SwiGLU FFNs (of one width, or of a width
// each for heterogeneous experts) whose matrices are stacked, torchtitan's
// GroupedExperts: each projection of all the experts of one width is one
// [experts, out, in] parameter, which the grouped GEMM reads directly and the
// optimizer steps as one tensor. Checkpoints still name every expert's matrices
// by GLOBAL expert id ("<gid>.w1", ...; stacked_params() says which row is
// which), so they do not depend on how experts are spread over ranks.
//
// Heterogeneous widths keep one stack per width, in the order the widths first
// appear: stacks padded to the largest width with masked rows would multiply
// the expert FLOPs, the optimizer's memory traffic and the gradient exchange by
// max/mean width, and the padding would need masking in init, weight decay and
// gradient norms; per-width stacks hold nothing but real weights.
//
// Which GEMMs run them (grouped kernels, LibTorch's GEMM per expert or padded
// and batched) is a path of model/expert_gemm.h: the trainer sets the one it
// measured fastest; a model outside the trainer takes rule_path's.
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

#include "config/choices.h"
#include "kernels/grouped_matmul.h"
#include "model/expert_gemm.h"
#include "model/token_dispatcher.h"

namespace moelab {

// One expert's matrices: views of its rows of the stacks.
struct ExpertWeights {
  torch::Tensor w1, w3;  // [width, d_model]
  torch::Tensor w2;      // [d_model, width]
};

// A stacked parameter (name relative to the module that lists it) and the
// names checkpoints give its rows, row i first.
struct StackedParam {
  std::string name;
  std::vector<std::string> row_names;
};
using StackedParams = std::vector<StackedParam>;

// The experts of one hidden width, each projection one parameter.
class ExpertStackImpl : public torch::nn::Module {
 public:
  ExpertStackImpl(int64_t d_model, int64_t width, int64_t experts);
  int64_t width() const { return w1.size(1); }

  torch::Tensor w1, w3;  // [experts, width, d_model]
  torch::Tensor w2;      // [experts, d_model, width]
};
TORCH_MODULE(ExpertStack);

class ExpertsImpl : public torch::nn::Module {
 public:
  ExpertsImpl(int64_t d_model, int64_t d_expert, const std::vector<int64_t>& global_ids);
  // widths[i]: the hidden width of the expert global_ids[i].
  ExpertsImpl(int64_t d_model, const std::vector<int64_t>& widths,
              const std::vector<int64_t>& global_ids);
  // Rows grouped by local expert (as a dispatcher returns them); outputs stay
  // in the same row order. Experts that got no rows still take part, so every
  // expert has a (zero) gradient. Runs the path set_path chose where it can
  // run the tokens' dtype and device, else rule_path's.
  torch::Tensor forward(const DispatchedTokens& dispatched);
  void set_path(ExpertGemm path) { path_ = path; }
  ExpertShape shape(torch::ScalarType dtype, const torch::Device& device) const;
  // The same, one expert at a time: the reference for the grouped path.
  torch::Tensor forward_each(const DispatchedTokens& dispatched);
  // The same as grouped matmuls (experts of one width).
  torch::Tensor forward_grouped(const DispatchedTokens& dispatched,
                                CpuTiles tiles = CpuTiles::kBest);
  // The same as batched matmuls over [E, rows of the largest group, d], the
  // other groups padded with zero rows (experts of one width).
  torch::Tensor forward_padded(const DispatchedTokens& dispatched);

  const std::vector<int64_t>& global_ids() const { return global_ids_; }
  ExpertWeights expert(size_t local_index) const;
  // One stack per width, registered as "width_<w>".
  const std::vector<ExpertStack>& stacks() const { return stacks_; }
  // Every stacked parameter ("width_<w>.w1") with its rows' names ("<gid>.w1").
  StackedParams stacked_params() const;

 private:
  // Where a local expert's matrices live: row `row` of stacks_[stack].
  struct Slot {
    size_t stack;
    int64_t row;
  };

  void check_groups(const DispatchedTokens& dispatched) const;
  // Whether padding every group to the largest at most quadruples the rows.
  bool padding_is_bounded(const DispatchedTokens& dispatched) const;

  std::vector<int64_t> global_ids_;
  std::vector<ExpertStack> stacks_;
  std::vector<Slot> slots_;  // by local expert
  ExpertGemm path_ = ExpertGemm::kAuto;
};
TORCH_MODULE(Experts);

}  // namespace moelab
