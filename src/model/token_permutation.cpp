#include "model/token_permutation.h"

#include <numeric>
#include <stdexcept>
#include <string>

#include "kernels/slot_sum.h"

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

class GatherAssignments : public torch::autograd::Function<GatherAssignments> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& hidden,
                               const SortedAssignments* sorted) {
    ctx->saved_data["unsort"] = sorted->unsort;
    ctx->saved_data["tokens"] = sorted->tokens;
    ctx->saved_data["slots"] = sorted->slots;
    const torch::Tensor token_of_row =
        sorted->order.slice(0, 0, sorted->kept).div(sorted->slots, "floor");
    return hidden.index_select(0, token_of_row);
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    if (!grads[0].defined()) return {torch::Tensor(), torch::Tensor()};
    // Row unsort[t * k + s] holds slot s of token t; rows past the kept ones
    // are dropped assignments, which add nothing.
    const torch::Tensor unsort = ctx->saved_data["unsort"].toTensor();
    const int64_t tokens = ctx->saved_data["tokens"].toInt();
    const int64_t slots = ctx->saved_data["slots"].toInt();
    return {gather_slot_sum(grads[0], unsort.view({tokens, slots})), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor inverse_permutation(const torch::Tensor& permutation) {
  return torch::empty_like(permutation)
      .scatter_(0, permutation, torch::arange(permutation.numel(), permutation.options()));
}

namespace {

[[noreturn]] void reject_expert_ids(int64_t num_experts) {
  throw std::invalid_argument("sort_assignments: expert ids must lie in [-1, " +
                              std::to_string(num_experts) + ")");
}

// On the CPU a counting sort: one pass counts the keys, one places each
// assignment (order) and notes where it went (unsort). torch::sort's stable
// merge sort and the scatter that inverts it were most of a fine-grained
// layer's dispatch (top-8 of 64 experts sorts four times a top-2 layer's keys).
void counting_sort(const torch::Tensor& flat, int64_t num_experts, SortedAssignments& sorted) {
  const auto ids = flat.contiguous();
  const int64_t* id = ids.data_ptr<int64_t>();
  const int64_t n = ids.numel();
  const auto key = [&](int64_t i) { return id[i] < 0 ? num_experts : id[i]; };
  std::vector<int64_t> next(num_experts + 2, 0);  // bin b starts at next[b] once summed
  for (int64_t i = 0; i < n; ++i) {
    if (id[i] < -1 || id[i] >= num_experts) reject_expert_ids(num_experts);
    ++next[key(i) + 1];
  }
  sorted.counts.assign(next.begin() + 1, next.begin() + 1 + num_experts);
  sorted.kept = n - next[num_experts + 1];
  std::partial_sum(next.begin(), next.end(), next.begin());
  sorted.order = torch::empty({n}, ids.options());
  sorted.unsort = torch::empty({n}, ids.options());
  int64_t* order = sorted.order.data_ptr<int64_t>();
  int64_t* unsort = sorted.unsort.data_ptr<int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    const int64_t at = next[key(i)]++;
    order[at] = i;
    unsort[i] = at;
  }
}

// Elsewhere torch's stable sort; the counts are read back once, with the number
// of out-of-range ids, in one transfer (one host sync on a GPU).
void device_sort(const torch::Tensor& flat, int64_t num_experts, SortedAssignments& sorted) {
  // Dropped assignments get key E so the stable sort puts them last, in order.
  const torch::Tensor keys = torch::where(flat < 0, num_experts, flat);
  sorted.order = std::get<1>(torch::sort(keys, /*stable=*/true, 0, false));
  sorted.unsort = inverse_permutation(sorted.order);
  const torch::Tensor invalid = ((flat < -1) | (flat >= num_experts)).sum().reshape({1});
  const torch::Tensor summary =
      torch::cat(
          {torch::bincount(keys, /*weights=*/{}, num_experts + 1).narrow(0, 0, num_experts + 1),
           invalid})
          .to(torch::kCPU, torch::kLong)
          .contiguous();
  const int64_t* c = summary.data_ptr<int64_t>();
  if (c[num_experts + 1] > 0) reject_expert_ids(num_experts);
  sorted.counts.assign(c, c + num_experts);
  sorted.kept = flat.numel() - c[num_experts];
}

}  // namespace

SortedAssignments sort_assignments(const torch::Tensor& expert_ids, int64_t num_experts) {
  if (expert_ids.dim() != 2 || expert_ids.scalar_type() != torch::kLong) {
    throw std::invalid_argument("sort_assignments: expects int64 expert ids [T, k]");
  }
  SortedAssignments sorted;
  sorted.tokens = expert_ids.size(0);
  sorted.slots = expert_ids.size(1);
  const torch::Tensor flat = expert_ids.reshape({-1});
  if (flat.is_cpu()) {
    counting_sort(flat, num_experts, sorted);
  } else {
    device_sort(flat, num_experts, sorted);
  }
  return sorted;
}

torch::Tensor gather_assignments(const torch::Tensor& hidden, const SortedAssignments& sorted) {
  return GatherAssignments::apply(hidden, &sorted);
}

torch::Tensor combine_assignments(const torch::Tensor& expert_out, const torch::Tensor& gates_TK,
                                  const SortedAssignments& sorted) {
  // Slot s of token t is row unsort[t * k + s]; rows past the kept ones are
  // dropped assignments.
  return gather_weighted_slot_sum(expert_out, sorted.unsort.view({sorted.tokens, sorted.slots}),
                                  gates_TK);
}

torch::Tensor permute_rows(const torch::Tensor& src, const torch::Tensor& perm,
                           const torch::Tensor& inverse) {
  return PermuteRows::apply(src, perm, inverse);
}

}  // namespace moelab
