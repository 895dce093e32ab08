#include "model/token_permutation.h"

#include <stdexcept>
#include <string>

namespace moelab {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

class PermuteRows : public torch::autograd::Function<PermuteRows> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& src,
                               const torch::Tensor& perm, const torch::Tensor& inverse) {
    ctx->saved_data["inverse"] = inverse;
    return src.index_select(0, perm);
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    if (!grads[0].defined()) return {torch::Tensor(), torch::Tensor(), torch::Tensor()};
    const torch::Tensor inverse = ctx->saved_data["inverse"].toTensor();
    return {grads[0].index_select(0, inverse), torch::Tensor(), torch::Tensor()};
  }
};

// Kept assignment rows padded with zero rows for the dropped ones: [T*k, d] in
// sorted order, ready to be un-sorted by one gather.
torch::Tensor pad_dropped(const torch::Tensor& rows, const SortedAssignments& sorted) {
  const int64_t dropped = sorted.tokens * sorted.slots - sorted.kept;
  if (dropped == 0) return rows;
  return torch::cat({rows, torch::zeros({dropped, rows.size(1)}, rows.options())});
}

class GatherAssignments : public torch::autograd::Function<GatherAssignments> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& hidden,
                               const SortedAssignments* sorted) {
    ctx->saved_data["unsort"] = sorted->unsort;
    ctx->saved_data["tokens"] = sorted->tokens;
    ctx->saved_data["slots"] = sorted->slots;
    ctx->saved_data["kept"] = sorted->kept;
    const torch::Tensor token_of_row =
        sorted->order.slice(0, 0, sorted->kept).div(sorted->slots, "floor");
    return hidden.index_select(0, token_of_row);
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    if (!grads[0].defined()) return {torch::Tensor(), torch::Tensor()};
    SortedAssignments sorted;
    sorted.unsort = ctx->saved_data["unsort"].toTensor();
    sorted.tokens = ctx->saved_data["tokens"].toInt();
    sorted.slots = ctx->saved_data["slots"].toInt();
    sorted.kept = ctx->saved_data["kept"].toInt();
    const torch::Tensor per_slot = pad_dropped(grads[0], sorted)
                                       .index_select(0, sorted.unsort)
                                       .view({sorted.tokens, sorted.slots, grads[0].size(1)});
    // Slot by slot: a bf16 sum over the middle dimension is ~10x slower on the CPU.
    torch::Tensor grad = per_slot.select(1, 0).clone();
    for (int64_t s = 1; s < sorted.slots; ++s) grad += per_slot.select(1, s);
    return {grad, torch::Tensor()};
  }
};

}  // namespace

torch::Tensor inverse_permutation(const torch::Tensor& permutation) {
  return torch::empty_like(permutation)
      .scatter_(0, permutation, torch::arange(permutation.numel(), permutation.options()));
}

SortedAssignments sort_assignments(const torch::Tensor& expert_ids, int64_t num_experts) {
  if (expert_ids.dim() != 2 || expert_ids.scalar_type() != torch::kLong) {
    throw std::invalid_argument("sort_assignments: expects int64 expert ids [T, k]");
  }
  const torch::Tensor flat = expert_ids.reshape({-1});
  SortedAssignments sorted;
  sorted.tokens = expert_ids.size(0);
  sorted.slots = expert_ids.size(1);
  // Dropped assignments get key E so the stable sort puts them last, in order.
  const torch::Tensor keys = torch::where(flat < 0, num_experts, flat);
  sorted.order = std::get<1>(torch::sort(keys, /*stable=*/true, 0, false));
  sorted.unsort = inverse_permutation(sorted.order);
  // The counts size the expert batches, so they are read back: once, with the
  // number of out-of-range ids, in one transfer (one host sync on a GPU).
  const torch::Tensor invalid = ((flat < -1) | (flat >= num_experts)).sum().reshape({1});
  const torch::Tensor summary =
      torch::cat(
          {torch::bincount(keys, /*weights=*/{}, num_experts + 1).narrow(0, 0, num_experts + 1),
           invalid})
          .to(torch::kCPU, torch::kLong)
          .contiguous();
  const int64_t* c = summary.data_ptr<int64_t>();
  if (c[num_experts + 1] > 0) {
    throw std::invalid_argument("sort_assignments: expert ids must lie in [-1, " +
                                std::to_string(num_experts) + ")");
  }
  sorted.counts.assign(c, c + num_experts);
  sorted.kept = flat.numel() - c[num_experts];
  return sorted;
}

torch::Tensor gather_assignments(const torch::Tensor& hidden, const SortedAssignments& sorted) {
  return GatherAssignments::apply(hidden, &sorted);
}

torch::Tensor scatter_assignments(const torch::Tensor& expert_out,
                                  const SortedAssignments& sorted) {
  return permute_rows(pad_dropped(expert_out, sorted), sorted.unsort, sorted.order)
      .view({sorted.tokens, sorted.slots, expert_out.size(1)});
}

torch::Tensor permute_rows(const torch::Tensor& src, const torch::Tensor& perm,
                           const torch::Tensor& inverse) {
  return PermuteRows::apply(src, perm, inverse);
}

}  // namespace moelab
