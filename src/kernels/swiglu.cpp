#include "kernels/swiglu.h"

#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>

#include "kernels/cpu_loop.h"

namespace moelab {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

template <typename T>
MOELAB_CPU_CLONES void forward_range(const T* gate_up, T* y, int64_t begin, int64_t end,
                                     int64_t h) {
  using Acc = at::opmath_type<T>;
  for (int64_t r = begin; r < end; ++r) {
    const T* a = gate_up + r * 2 * h;
    const T* b = a + h;
    T* yr = y + r * h;
#pragma omp simd
    for (int64_t i = 0; i < h; ++i) {
      const Acc ai = cpu::load(a, i);
      cpu::store(yr, i, ai / (Acc(1) + cpu::exp_approx(-ai)) * cpu::load(b, i));
    }
  }
}

// With s = sigmoid(a): d/da = g * b * s * (1 + a * (1 - s)), d/db = g * a * s.
template <typename T>
MOELAB_CPU_CLONES void backward_range(const T* g, const T* gate_up, T* grad, int64_t begin,
                                      int64_t end, int64_t h) {
  using Acc = at::opmath_type<T>;
  for (int64_t r = begin; r < end; ++r) {
    const T* a = gate_up + r * 2 * h;
    const T* b = a + h;
    const T* gr = g + r * h;
    T* da = grad + r * 2 * h;
    T* db = da + h;
#pragma omp simd
    for (int64_t i = 0; i < h; ++i) {
      const Acc ai = cpu::load(a, i), gi = cpu::load(gr, i);
      const Acc s = Acc(1) / (Acc(1) + cpu::exp_approx(-ai));
      cpu::store(da, i, gi * cpu::load(b, i) * s * (Acc(1) + ai * (Acc(1) - s)));
      cpu::store(db, i, gi * ai * s);
    }
  }
}

struct SwigluFunction : torch::autograd::Function<SwigluFunction> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& gate_up_in) {
    const auto gate_up = gate_up_in.contiguous();
    const int64_t h = gate_up.size(-1) / 2;
    auto sizes = gate_up.sizes().vec();
    sizes.back() = h;
    auto y = torch::empty(sizes, gate_up.options());
    AT_DISPATCH_FLOATING_TYPES_AND(at::kBFloat16, gate_up.scalar_type(), "swiglu", [&] {
      at::parallel_for(0, y.numel() / h, cpu::row_grain(h), [&](int64_t begin, int64_t end) {
        forward_range<scalar_t>(gate_up.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(), begin, end,
                                h);
      });
    });
    ctx->save_for_backward({gate_up});
    return y;
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const auto gate_up = ctx->get_saved_variables()[0];
    const auto g = grads[0].contiguous();
    const int64_t h = gate_up.size(-1) / 2;
    auto grad = torch::empty_like(gate_up);
    AT_DISPATCH_FLOATING_TYPES_AND(at::kBFloat16, gate_up.scalar_type(), "swiglu_backward", [&] {
      at::parallel_for(0, g.numel() / h, cpu::row_grain(h), [&](int64_t begin, int64_t end) {
        backward_range<scalar_t>(g.data_ptr<scalar_t>(), gate_up.data_ptr<scalar_t>(),
                                 grad.data_ptr<scalar_t>(), begin, end, h);
      });
    });
    return {grad};
  }
};

bool kernel_covers(const torch::Tensor& gate_up) {
  return cpu::loops_cover(gate_up) && gate_up.dim() >= 1 && gate_up.size(-1) % 2 == 0;
}

}  // namespace

torch::Tensor swiglu(const torch::Tensor& gate_up) {
  if (!kernel_covers(gate_up) || gate_up.numel() == 0) return swiglu_reference(gate_up);
  return SwigluFunction::apply(gate_up);
}

torch::Tensor swiglu_reference(const torch::Tensor& gate_up) {
  const auto halves = gate_up.chunk(2, -1);
  return torch::silu(halves[0]) * halves[1];
}

}  // namespace moelab
