#include "model/experts.h"

#include <algorithm>
#include <string>

#include "kernels/grouped_matmul.h"
#include "kernels/swiglu.h"
#include "util/error.h"

namespace moelab {
namespace {

// Every expert's weights in `dtype`, as the batched GEMMs take them: gate_up
// [E, d, 2h] (w1 and w3 side by side, one GEMM for both) and down [E, h, d],
// views of [E, out, in] stacks. One concatenation per stack: w1 and w3 are
// interleaved per expert, not stacked apart and then joined.
struct StackedWeights {
  torch::Tensor gate_up, down;
};

StackedWeights stacked_weights(const std::vector<SwiGLU>& experts, c10::ScalarType dtype) {
  std::vector<torch::Tensor> gate_up, down;
  for (const auto& e : experts) {
    gate_up.push_back(e->w1);
    gate_up.push_back(e->w3);
    down.push_back(e->w2);
  }
  const auto n = static_cast<int64_t>(experts.size());
  const int64_t hidden = experts.front()->w1.size(0), d = experts.front()->w1.size(1);
  return {torch::cat(gate_up, 0).to(dtype).view({n, 2 * hidden, d}).transpose(1, 2),
          torch::stack(down).to(dtype).transpose(1, 2)};
}

}  // namespace

ExpertsImpl::ExpertsImpl(int64_t d_model, int64_t d_expert, const std::vector<int64_t>& global_ids)
    : ExpertsImpl(d_model, std::vector<int64_t>(global_ids.size(), d_expert), global_ids) {}

ExpertsImpl::ExpertsImpl(int64_t d_model, const std::vector<int64_t>& widths,
                         const std::vector<int64_t>& global_ids)
    : global_ids_(global_ids) {
  for (size_t i = 0; i < global_ids_.size(); ++i) {
    experts_.push_back(
        register_module(std::to_string(global_ids_[i]), SwiGLU(d_model, widths.at(i))));
  }
}

void ExpertsImpl::check_groups(const DispatchedTokens& dispatched) const {
  if (dispatched.counts.size() != experts_.size()) {
    throw std::logic_error("Experts: dispatcher returned " +
                           std::to_string(dispatched.counts.size()) + " groups for " +
                           std::to_string(experts_.size()) + " local experts");
  }
}

torch::Tensor ExpertsImpl::forward(const DispatchedTokens& dispatched) {
  const bool same_width =
      !experts_.empty() && std::all_of(experts_.begin(), experts_.end(), [&](const SwiGLU& e) {
        return e->w2.size(1) == experts_.front()->w2.size(1);
      });
  if (dispatched.tokens.scalar_type() != torch::kBFloat16 || !same_width) {
    return forward_each(dispatched);
  }
  const int64_t d = experts_.front()->w2.size(0), hidden = experts_.front()->w2.size(1);
  if (dispatched.tokens.is_cpu()) {
    if (grouped_matmul_has_cpu_kernel() && d % 16 == 0 && hidden % 16 == 0) {
      return forward_grouped(dispatched);
    }
    // Bounded padding: an expert holding most tokens would multiply the work.
    const int64_t largest = *std::max_element(dispatched.counts.begin(), dispatched.counts.end());
    const auto experts = static_cast<int64_t>(experts_.size());
    if (experts * largest <= 4 * dispatched.tokens.size(0)) return forward_padded(dispatched);
  }
  // _grouped_mm wants every row of every operand 16-byte aligned.
  if (d % 8 == 0 && hidden % 8 == 0) return forward_grouped(dispatched);
  return forward_each(dispatched);
}

torch::Tensor ExpertsImpl::forward_each(const DispatchedTokens& dispatched) {
  check_groups(dispatched);
  // One split, not a narrow per expert: the backward of each narrow would
  // materialise a zero gradient the size of all the tokens (E of them a layer),
  // where split's backward concatenates the experts' gradients once.
  const std::vector<torch::Tensor> inputs =
      dispatched.tokens.split_with_sizes(dispatched.counts, 0);
  std::vector<torch::Tensor> outputs;
  outputs.reserve(experts_.size());
  for (size_t e = 0; e < experts_.size(); ++e) outputs.push_back(experts_[e]->forward(inputs[e]));
  return torch::cat(outputs, 0);
}

torch::Tensor ExpertsImpl::forward_grouped(const DispatchedTokens& dispatched) {
  check_groups(dispatched);
  const auto& x = dispatched.tokens;
  const auto w = stacked_weights(experts_, x.scalar_type());
  return grouped_matmul(swiglu(grouped_matmul(x, w.gate_up, dispatched.counts)), w.down,
                        dispatched.counts);
}

torch::Tensor ExpertsImpl::forward_padded(const DispatchedTokens& dispatched) {
  check_groups(dispatched);
  const auto& x = dispatched.tokens;
  const int64_t experts = static_cast<int64_t>(experts_.size()), d = x.size(1);
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
  const auto w = stacked_weights(experts_, x.scalar_type());
  const auto y = torch::bmm(swiglu(torch::bmm(padded, w.gate_up)), w.down);  // [E, rows, d]
  return y.view({experts * rows, d}).index_select(0, index);
}

}  // namespace moelab
