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

// Slot by slot into an fp32 row (acc, d wide), so that each loop runs along
// the contiguous d.
template <typename T>
MOELAB_CPU_CLONES void weighted_sum_range(const T* p, const T* g, T* y, at::opmath_type<T>* acc,
                                          int64_t begin, int64_t end, int64_t k, int64_t d) {
  using Acc = at::opmath_type<T>;
  for (int64_t t = begin; t < end; ++t) {
    std::fill(acc, acc + d, Acc(0));
    for (int64_t s = 0; s < k; ++s) {
      const Acc gate = cpu::load(g, t * k + s);
      const T* ps = p + (t * k + s) * d;
#pragma omp simd
      for (int64_t i = 0; i < d; ++i) acc[i] += gate * cpu::load(ps, i);
    }
    T* yt = y + t * d;
#pragma omp simd
    for (int64_t i = 0; i < d; ++i) cpu::store(yt, i, acc[i]);
  }
}

// d per_slot[t, s] = gates[t, s] * gy[t]; d gates[t, s] = <gy[t], per_slot[t, s]>.
template <typename T>
MOELAB_CPU_CLONES void weighted_sum_backward_range(const T* gy, const T* p, const T* g, T* dp,
                                                   T* dg, int64_t begin, int64_t end, int64_t k,
                                                   int64_t d) {
  using Acc = at::opmath_type<T>;
  for (int64_t t = begin; t < end; ++t) {
    const T* gyt = gy + t * d;
    for (int64_t s = 0; s < k; ++s) {
      const T* ps = p + (t * k + s) * d;
      T* dps = dp + (t * k + s) * d;
      const Acc gate = cpu::load(g, t * k + s);
      Acc dot = 0;
#pragma omp simd reduction(+ : dot)
      for (int64_t i = 0; i < d; ++i) {
        const Acc gyi = cpu::load(gyt, i);
        dot += gyi * cpu::load(ps, i);
        cpu::store(dps, i, gate * gyi);
      }
      cpu::store(dg, t * k + s, dot);
    }
  }
}

struct WeightedSlotSum : torch::autograd::Function<WeightedSlotSum> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& per_slot_in,
                            const at::Tensor& gates_in) {
    const auto per_slot = per_slot_in.contiguous();
    const auto gates = gates_in.contiguous();
    const int64_t tokens = per_slot.size(0), k = per_slot.size(1), d = per_slot.size(2);
    auto y = torch::empty({tokens, d}, per_slot.options());
    AT_DISPATCH_FLOATING_TYPES_AND(at::kBFloat16, per_slot.scalar_type(), "weighted_slot_sum", [&] {
      at::parallel_for(0, tokens, cpu::row_grain(k * d), [&](int64_t begin, int64_t end) {
        std::vector<at::opmath_type<scalar_t>> acc(d);
        weighted_sum_range<scalar_t>(per_slot.data_ptr<scalar_t>(), gates.data_ptr<scalar_t>(),
                                     y.data_ptr<scalar_t>(), acc.data(), begin, end, k, d);
      });
    });
    ctx->save_for_backward({per_slot, gates});
    return y;
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto& per_slot = saved[0];
    const auto& gates = saved[1];
    const auto gy = grads[0].contiguous();
    const int64_t tokens = per_slot.size(0), k = per_slot.size(1), d = per_slot.size(2);
    auto d_per_slot = torch::empty_like(per_slot);
    auto d_gates = torch::empty_like(gates);
    AT_DISPATCH_FLOATING_TYPES_AND(
        at::kBFloat16, per_slot.scalar_type(), "weighted_slot_sum_backward", [&] {
          at::parallel_for(0, tokens, cpu::row_grain(k * d), [&](int64_t begin, int64_t end) {
            weighted_sum_backward_range<scalar_t>(
                gy.data_ptr<scalar_t>(), per_slot.data_ptr<scalar_t>(), gates.data_ptr<scalar_t>(),
                d_per_slot.data_ptr<scalar_t>(), d_gates.data_ptr<scalar_t>(), begin, end, k, d);
          });
        });
    return {d_per_slot, d_gates};
  }
};

template <typename T>
MOELAB_CPU_CLONES void gather_sum_range(const T* rows, int64_t n, const int64_t* index, T* y,
                                        at::opmath_type<T>* acc, int64_t begin, int64_t end,
                                        int64_t k, int64_t d) {
  using Acc = at::opmath_type<T>;
  for (int64_t t = begin; t < end; ++t) {
    std::fill(acc, acc + d, Acc(0));
    for (int64_t s = 0; s < k; ++s) {
      if (index[t * k + s] >= n) continue;
      const T* row = rows + index[t * k + s] * d;
#pragma omp simd
      for (int64_t i = 0; i < d; ++i) acc[i] += cpu::load(row, i);
    }
    T* yt = y + t * d;
#pragma omp simd
    for (int64_t i = 0; i < d; ++i) cpu::store(yt, i, acc[i]);
  }
}

}  // namespace

at::Tensor weighted_slot_sum(const at::Tensor& per_slot_TKD, const at::Tensor& gates_TK) {
  TORCH_CHECK(per_slot_TKD.dim() == 3 && gates_TK.dim() == 2 &&
                  gates_TK.size(0) == per_slot_TKD.size(0) &&
                  gates_TK.size(1) == per_slot_TKD.size(1) &&
                  gates_TK.scalar_type() == per_slot_TKD.scalar_type(),
              "weighted_slot_sum: expected per_slot [T, k, d] and gates [T, k] of one dtype, got ",
              per_slot_TKD.sizes(), " and ", gates_TK.sizes());
  if (!cpu::loops_cover(per_slot_TKD) || !gates_TK.device().is_cpu() || per_slot_TKD.numel() == 0) {
    return weighted_slot_sum_reference(per_slot_TKD, gates_TK);
  }
  return WeightedSlotSum::apply(per_slot_TKD, gates_TK);
}

at::Tensor weighted_slot_sum_reference(const at::Tensor& per_slot_TKD, const at::Tensor& gates_TK) {
  return torch::bmm(gates_TK.unsqueeze(1), per_slot_TKD).squeeze(1);
}

at::Tensor gather_slot_sum(const at::Tensor& rows_ND, const at::Tensor& index_TK) {
  TORCH_CHECK(rows_ND.dim() == 2 && index_TK.dim() == 2 && index_TK.scalar_type() == torch::kLong,
              "gather_slot_sum: expected rows [N, d] and int64 indices [T, k], got ",
              rows_ND.sizes(), " and ", index_TK.sizes());
  const int64_t n = rows_ND.size(0), d = rows_ND.size(1);
  const int64_t tokens = index_TK.size(0), k = index_TK.size(1);
  if (!cpu::loops_cover(rows_ND) || !index_TK.device().is_cpu()) {
    const auto padded = torch::cat({rows_ND, torch::zeros({1, d}, rows_ND.options())});
    const auto per_slot =
        padded.index_select(0, index_TK.reshape(-1).clamp_max(n)).view({tokens, k, d});
    return per_slot.sum(1);
  }
  const auto rows = rows_ND.contiguous();
  const auto index = index_TK.contiguous();
  auto y = torch::empty({tokens, d}, rows.options());
  AT_DISPATCH_FLOATING_TYPES_AND(at::kBFloat16, rows.scalar_type(), "gather_slot_sum", [&] {
    at::parallel_for(0, tokens, cpu::row_grain(k * d), [&](int64_t begin, int64_t end) {
      std::vector<at::opmath_type<scalar_t>> acc(d);
      gather_sum_range<scalar_t>(rows.data_ptr<scalar_t>(), n, index.data_ptr<int64_t>(),
                                 y.data_ptr<scalar_t>(), acc.data(), begin, end, k, d);
    });
  });
  return y;
}

}  // namespace moelab
