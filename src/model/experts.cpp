#include "model/experts.h"

#include <algorithm>
#include <string>

#include "kernels/swiglu.h"
#include "model/swiglu.h"
#include "util/error.h"

namespace moelab {
namespace {

// A stack's weights in `dtype`, as the batched GEMMs take them: gate_up
// [E, d, 2h] (w1 and w3 side by side, one GEMM for both) and down [E, h, d],
// transposed views of [E, out, in] tensors.
struct GemmWeights {
  torch::Tensor gate_up, down;
};

GemmWeights gemm_weights(const ExpertStack& stack, c10::ScalarType dtype) {
  return {join_weight_parts({stack->w1.transpose(1, 2), stack->w3.transpose(1, 2)}, dtype),
          stack->w2.to(dtype).transpose(1, 2)};
}

}  // namespace

ExpertStackImpl::ExpertStackImpl(int64_t d_model, int64_t width, int64_t experts) {
  w1 = register_parameter("w1", torch::empty({experts, width, d_model}));
  w2 = register_parameter("w2", torch::empty({experts, d_model, width}));
  w3 = register_parameter("w3", torch::empty({experts, width, d_model}));
}

ExpertsImpl::ExpertsImpl(int64_t d_model, int64_t d_expert, const std::vector<int64_t>& global_ids)
    : ExpertsImpl(d_model, std::vector<int64_t>(global_ids.size(), d_expert), global_ids) {}

ExpertsImpl::ExpertsImpl(int64_t d_model, const std::vector<int64_t>& widths,
                         const std::vector<int64_t>& global_ids)
    : global_ids_(global_ids) {
  std::vector<int64_t> stack_widths, stack_sizes;
  for (size_t i = 0; i < global_ids_.size(); ++i) {
    const int64_t width = widths.at(i);
    const auto at = std::find(stack_widths.begin(), stack_widths.end(), width);
    const auto stack = static_cast<size_t>(at - stack_widths.begin());
    if (at == stack_widths.end()) {
      stack_widths.push_back(width);
      stack_sizes.push_back(0);
    }
    slots_.push_back({stack, stack_sizes[stack]++});
  }
  for (size_t s = 0; s < stack_widths.size(); ++s) {
    stacks_.push_back(register_module("width_" + std::to_string(stack_widths[s]),
                                      ExpertStack(d_model, stack_widths[s], stack_sizes[s])));
  }
}

ExpertWeights ExpertsImpl::expert(size_t local_index) const {
  const Slot& slot = slots_.at(local_index);
  const ExpertStack& stack = stacks_[slot.stack];
  return {stack->w1[slot.row], stack->w3[slot.row], stack->w2[slot.row]};
}

StackedParams ExpertsImpl::stacked_params() const {
  StackedParams out;
  for (size_t s = 0; s < stacks_.size(); ++s) {
    const std::string stack = "width_" + std::to_string(stacks_[s]->width()) + ".";
    for (const char* weight : {"w1", "w2", "w3"}) {
      StackedParam param{stack + weight, {}};
      for (size_t e = 0; e < slots_.size(); ++e) {
        if (slots_[e].stack == s) {
          param.row_names.push_back(std::to_string(global_ids_[e]) + "." + weight);
        }
      }
      out.push_back(std::move(param));
    }
  }
  return out;
}

void ExpertsImpl::check_groups(const DispatchedTokens& dispatched) const {
  if (dispatched.counts.size() != slots_.size()) {
    throw std::logic_error("Experts: dispatcher returned " +
                           std::to_string(dispatched.counts.size()) + " groups for " +
                           std::to_string(slots_.size()) + " local experts");
  }
}

ExpertShape ExpertsImpl::shape(torch::ScalarType dtype, const torch::Device& device) const {
  ExpertShape shape{
      stacks_.front()->w2.size(1), {}, static_cast<int64_t>(slots_.size()), dtype, device};
  for (const auto& stack : stacks_) shape.widths.push_back(stack->width());
  return shape;
}

bool ExpertsImpl::padding_is_bounded(const DispatchedTokens& dispatched) const {
  const int64_t largest = *std::max_element(dispatched.counts.begin(), dispatched.counts.end());
  return static_cast<int64_t>(slots_.size()) * largest <= 4 * dispatched.tokens.size(0);
}

torch::Tensor ExpertsImpl::forward(const DispatchedTokens& dispatched) {
  const ExpertShape shape =
      this->shape(dispatched.tokens.scalar_type(), dispatched.tokens.device());
  const ExpertGemm path = can_run(path_, shape) ? path_ : rule_path(shape);
  switch (path) {
    case ExpertGemm::kGrouped:
      return forward_grouped(dispatched);
    case ExpertGemm::kGroupedAvx512:
      return forward_grouped(dispatched, CpuTiles::kAvx512Dot);
    case ExpertGemm::kPadded:
      // An expert holding most tokens would multiply the work.
      if (padding_is_bounded(dispatched)) return forward_padded(dispatched);
      return forward_each(dispatched);
    default:
      return forward_each(dispatched);
  }
}

torch::Tensor ExpertsImpl::forward_each(const DispatchedTokens& dispatched) {
  check_groups(dispatched);
  // One split, not a narrow per expert: the backward of each narrow would
  // materialise a zero gradient the size of all the tokens (E of them a layer),
  // where split's backward concatenates the experts' gradients once. The
  // stacks are unbound once for the same reason.
  const std::vector<torch::Tensor> inputs =
      dispatched.tokens.split_with_sizes(dispatched.counts, 0);
  std::vector<std::vector<torch::Tensor>> w1, w2, w3;
  for (const auto& stack : stacks_) {
    w1.push_back(stack->w1.unbind(0));
    w2.push_back(stack->w2.unbind(0));
    w3.push_back(stack->w3.unbind(0));
  }
  std::vector<torch::Tensor> outputs;
  outputs.reserve(slots_.size());
  for (size_t e = 0; e < slots_.size(); ++e) {
    const Slot& at = slots_[e];
    const auto row = static_cast<size_t>(at.row);
    outputs.push_back(
        swiglu_ffn(inputs[e], w1[at.stack][row], w2[at.stack][row], w3[at.stack][row]));
  }
  return torch::cat(outputs, 0);
}

torch::Tensor ExpertsImpl::forward_grouped(const DispatchedTokens& dispatched, CpuTiles tiles) {
  check_groups(dispatched);
  const auto& x = dispatched.tokens;
  const ExpertStack& stack = stacks_.at(0);
  // The master weights as they are (transposed views of the [E, out, in]
  // stacks): the bf16 kernel rounds them as it packs them, and gate and up
  // stay two parts of one GEMM.
  const auto gate_up = grouped_matmul(x, {stack->w1.transpose(1, 2), stack->w3.transpose(1, 2)},
                                      dispatched.counts, tiles);
  return grouped_matmul(swiglu(gate_up), stack->w2.transpose(1, 2), dispatched.counts, tiles);
}

torch::Tensor ExpertsImpl::forward_padded(const DispatchedTokens& dispatched) {
  check_groups(dispatched);
  const auto& x = dispatched.tokens;
  const int64_t experts = static_cast<int64_t>(slots_.size()), d = x.size(1);
  const int64_t rows = *std::max_element(dispatched.counts.begin(), dispatched.counts.end());
  // Row r of group e goes to slot e * rows + r of the padded batch.
  std::vector<int64_t> slots;
  slots.reserve(x.size(0));
  for (int64_t e = 0; e < experts; ++e) {
    for (int64_t r = 0; r < dispatched.counts[e]; ++r) slots.push_back(e * rows + r);
  }
  const auto index = torch::tensor(slots, torch::TensorOptions(torch::kLong)).to(x.device());
  const auto padded = torch::zeros({experts * rows, d}, x.options())
                          .index_copy(0, index, x)
                          .view({experts, rows, d});
  const auto w = gemm_weights(stacks_.at(0), x.scalar_type());
  const auto y = torch::bmm(swiglu(torch::bmm(padded, w.gate_up)), w.down);  // [E, rows, d]
  return y.view({experts * rows, d}).index_select(0, index);
}

}  // namespace moelab
