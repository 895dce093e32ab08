#include "kernels/slot_sum.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <algorithm>
#include <vector>

#include "kernels/cpu_loop.h"

namespace moelab {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

// Token t's slots, each weighted by its gate (1 where gates is null), summed
// slot by slot into an fp32 row (acc, d wide), so that each loop runs along
// the contiguous d.
template <typename T>
MOELAB_CPU_CLONES void gather_sum_range(const T* rows, int64_t n, const int64_t* index,
                                        const T* gates, T* y, at::opmath_type<T>* acc,
                                        int64_t begin, int64_t end, int64_t k, int64_t d) {
  using Acc = at::opmath_type<T>;
  for (int64_t t = begin; t < end; ++t) {
    std::fill(acc, acc + d, Acc(0));
    for (int64_t s = 0; s < k; ++s) {
      if (index[t * k + s] >= n) continue;
      const Acc gate = gates ? cpu::load(gates, t * k + s) : Acc(1);
      const T* row = rows + index[t * k + s] * d;
#pragma omp simd
      for (int64_t i = 0; i < d; ++i) acc[i] += gate * cpu::load(row, i);
    }
    T* yt = y + t * d;
#pragma omp simd
    for (int64_t i = 0; i < d; ++i) cpu::store(yt, i, acc[i]);
  }
}

// For each row r in [begin, end) that slot = slot_of_row[r] names (token
// slot / k): d rows[r] = gates[slot] * gy[token]; d gates[slot] = <gy[token],
// rows[r]>. A row no slot names gets a zero gradient. In row order, so that
// rows and d_rows stream and only gy (one row per token) is read out of order.
template <typename T>
MOELAB_CPU_CLONES void gather_sum_backward_range(const T* gy, const T* rows,
                                                 const int64_t* slot_of_row, const T* gates,
                                                 T* d_rows, T* d_gates, int64_t begin, int64_t end,
                                                 int64_t k, int64_t d) {
  using Acc = at::opmath_type<T>;
  for (int64_t r = begin; r < end; ++r) {
    const int64_t slot = slot_of_row[r];
    T* d_row = d_rows + r * d;
    if (slot < 0) {
      std::fill(d_row, d_row + d, T(0));
      continue;
    }
    const T* gyt = gy + slot / k * d;
    const T* row = rows + r * d;
    const Acc gate = cpu::load(gates, slot);
    Acc dot = 0;
#pragma omp simd reduction(+ : dot)
    for (int64_t i = 0; i < d; ++i) {
      const Acc gyi = cpu::load(gyt, i);
      dot += gyi * cpu::load(row, i);
      cpu::store(d_row, i, gate * gyi);
    }
    cpu::store(d_gates, slot, dot);
  }
}

// The slot that names each of n rows (index_TK's inverse), -1 where none does;
// and d gates of the slots that name no row (dropped) zeroed.
template <typename T>
std::vector<int64_t> slot_of_each_row(const int64_t* index, int64_t slots, int64_t n, T* d_gates) {
  std::vector<int64_t> slot_of_row(n, -1);
  for (int64_t slot = 0; slot < slots; ++slot) {
    if (index[slot] < n) {
      slot_of_row[index[slot]] = slot;
    } else {
      d_gates[slot] = T(0);
    }
  }
  return slot_of_row;
}

// rows [N, d] and index [T, k] (int64) as the CPU loops read them, and gates
// [T, k] of the rows' dtype where given.
void check_slot_sum_inputs(const at::Tensor& rows, const at::Tensor& index, const at::Tensor& gates,
                           const char* name) {
  TORCH_CHECK(rows.dim() == 2 && index.dim() == 2 && index.scalar_type() == torch::kLong, name,
              ": expected rows [N, d] and int64 indices [T, k], got ", rows.sizes(), " and ",
              index.sizes());
  TORCH_CHECK(!gates.defined() ||
                  (gates.sizes() == index.sizes() && gates.scalar_type() == rows.scalar_type()),
              name, ": expected gates [T, k] of the rows' dtype, got ", gates.sizes());
}

// Runs range(scalar_t tag, begin, end, acc row) over the tokens in parallel.
template <typename Range>
void for_token_ranges(const at::Tensor& rows, int64_t tokens, int64_t k, const Range& range) {
  const int64_t d = rows.size(1);
  AT_DISPATCH_FLOATING_TYPES_AND(at::kBFloat16, rows.scalar_type(), "gather_slot_sum", [&] {
    at::parallel_for(0, tokens, cpu::row_grain(k * d), [&](int64_t begin, int64_t end) {
      std::vector<at::opmath_type<scalar_t>> acc(d);
      range(scalar_t{}, begin, end, acc.data());
    });
  });
}

// rows_ND gathered by index_TK and summed per token, weighted by gates_TK if defined.
at::Tensor cpu_gather_sum(const at::Tensor& rows, const at::Tensor& index,
                          const at::Tensor& gates) {
  const int64_t tokens = index.size(0), k = index.size(1), n = rows.size(0), d = rows.size(1);
  auto y = torch::empty({tokens, d}, rows.options());
  for_token_ranges(rows, tokens, k, [&](auto tag, int64_t b, int64_t e, auto* acc) {
    using T = decltype(tag);
    gather_sum_range<T>(rows.data_ptr<T>(), n, index.data_ptr<int64_t>(),
                        cpu::data_or_null<T>(gates), y.data_ptr<T>(), acc, b, e, k, d);
  });
  return y;
}

struct GatherWeightedSlotSum : torch::autograd::Function<GatherWeightedSlotSum> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& rows_in,
                            const at::Tensor& gates_in, const at::Tensor& index_in) {
    const auto rows = rows_in.contiguous();
    const auto gates = gates_in.contiguous();
    const auto index = index_in.contiguous();
    ctx->save_for_backward({rows, gates, index});
    return cpu_gather_sum(rows, index, gates);
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &rows = saved[0], &gates = saved[1], &index = saved[2];
    const auto gy = grads[0].contiguous();
    const int64_t k = index.size(1), n = rows.size(0), d = rows.size(1);
    auto d_rows = torch::empty_like(rows);
    auto d_gates = torch::empty_like(gates);
    AT_DISPATCH_FLOATING_TYPES_AND(
        at::kBFloat16, rows.scalar_type(), "gather_weighted_slot_sum", [&] {
          const auto slot_of_row = slot_of_each_row(index.data_ptr<int64_t>(), index.numel(), n,
                                                    d_gates.data_ptr<scalar_t>());
          at::parallel_for(0, n, cpu::row_grain(d), [&](int64_t begin, int64_t end) {
            gather_sum_backward_range<scalar_t>(gy.data_ptr<scalar_t>(), rows.data_ptr<scalar_t>(),
                                                slot_of_row.data(), gates.data_ptr<scalar_t>(),
                                                d_rows.data_ptr<scalar_t>(),
                                                d_gates.data_ptr<scalar_t>(), begin, end, k, d);
          });
        });
    return {d_rows, d_gates, at::Tensor()};
  }
};

// [T, k, d]: each slot's row, a zero row for a dropped slot.
at::Tensor gathered_slots(const at::Tensor& rows_ND, const at::Tensor& index_TK) {
  const int64_t n = rows_ND.size(0), d = rows_ND.size(1);
  const auto padded = torch::cat({rows_ND, torch::zeros({1, d}, rows_ND.options())});
  return padded.index_select(0, index_TK.reshape(-1).clamp_max(n))
      .view({index_TK.size(0), index_TK.size(1), d});
}

bool cpu_loops_run(const at::Tensor& rows_ND, const at::Tensor& index_TK) {
  return cpu::loops_cover(rows_ND) && index_TK.device().is_cpu();
}

}  // namespace

at::Tensor gather_weighted_slot_sum(const at::Tensor& rows_ND, const at::Tensor& index_TK,
                                    const at::Tensor& gates_TK) {
  check_slot_sum_inputs(rows_ND, index_TK, gates_TK, "gather_weighted_slot_sum");
  if (!cpu_loops_run(rows_ND, index_TK) || !gates_TK.device().is_cpu() || index_TK.numel() == 0) {
    return gather_weighted_slot_sum_reference(rows_ND, index_TK, gates_TK);
  }
  return GatherWeightedSlotSum::apply(rows_ND, gates_TK, index_TK);
}

at::Tensor gather_weighted_slot_sum_reference(const at::Tensor& rows_ND, const at::Tensor& index_TK,
                                              const at::Tensor& gates_TK) {
  return torch::bmm(gates_TK.unsqueeze(1), gathered_slots(rows_ND, index_TK)).squeeze(1);
}

at::Tensor gather_slot_sum(const at::Tensor& rows_ND, const at::Tensor& index_TK) {
  check_slot_sum_inputs(rows_ND, index_TK, at::Tensor(), "gather_slot_sum");
  if (!cpu_loops_run(rows_ND, index_TK)) return gathered_slots(rows_ND, index_TK).sum(1);
  return cpu_gather_sum(rows_ND.contiguous(), index_TK.contiguous(), at::Tensor());
}

}  // namespace moelab
