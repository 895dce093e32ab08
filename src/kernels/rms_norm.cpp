#include "kernels/rms_norm.h"

#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>

#include <cmath>

#include "kernels/cpu_loop.h"

namespace moelab {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

template <typename T, typename Out>
MOELAB_CPU_CLONES void forward_range(const T* x, const T* w, Out* y, at::opmath_type<T>* inv_rms,
                                     int64_t begin, int64_t end, int64_t d, double eps) {
  using Acc = at::opmath_type<T>;
  for (int64_t r = begin; r < end; ++r) {
    const T* xr = x + r * d;
    Acc sum_sq = 0;
#pragma omp simd reduction(+ : sum_sq)
    for (int64_t j = 0; j < d; ++j) sum_sq += cpu::load(xr, j) * cpu::load(xr, j);
    const Acc inv = Acc(1) / std::sqrt(sum_sq / Acc(d) + Acc(eps));
    inv_rms[r] = inv;
    Out* yr = y + r * d;
#pragma omp simd
    for (int64_t j = 0; j < d; ++j) cpu::store(yr, j, cpu::load(xr, j) * inv * cpu::load(w, j));
  }
}

// With xh = x * inv: dx = inv * (g * w - xh * mean(g * w * xh)), dw = sum over rows
// of g * xh, summed into this thread's row of dw.
template <typename T, typename Out>
MOELAB_CPU_CLONES void backward_range(const Out* g, const T* x, const T* w,
                                      const at::opmath_type<T>* inv_rms, T* dx,
                                      at::opmath_type<T>* dw, int64_t begin, int64_t end,
                                      int64_t d) {
  using Acc = at::opmath_type<T>;
  for (int64_t r = begin; r < end; ++r) {
    const Out* gr = g + r * d;
    const T* xr = x + r * d;
    const Acc inv = inv_rms[r];
    Acc dot = 0;
#pragma omp simd reduction(+ : dot)
    for (int64_t j = 0; j < d; ++j) dot += cpu::load(gr, j) * cpu::load(w, j) * cpu::load(xr, j);
    const Acc mean = dot * inv * inv / Acc(d);
    T* dxr = dx + r * d;
#pragma omp simd
    for (int64_t j = 0; j < d; ++j) {
      const Acc gj = cpu::load(gr, j), xj = cpu::load(xr, j);
      cpu::store(dxr, j, inv * (gj * cpu::load(w, j) - xj * mean));
      dw[j] += gj * xj * inv;
    }
  }
}

// Calls f(T{}, Out{}) for the covered pairs: x fp32, bf16 or double, y in x's dtype or bf16.
template <typename F>
void dispatch(c10::ScalarType x_dtype, c10::ScalarType out_dtype, F&& f) {
  AT_DISPATCH_FLOATING_TYPES_AND(at::kBFloat16, x_dtype, "rms_norm", [&] {
    if (out_dtype == x_dtype) {
      f(scalar_t{}, scalar_t{});
    } else {
      f(scalar_t{}, at::BFloat16{});
    }
  });
}

struct RmsNormFunction : torch::autograd::Function<RmsNormFunction> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x_in,
                               const torch::Tensor& weight_in, double eps,
                               c10::ScalarType out_dtype) {
    const auto x = x_in.contiguous();
    const auto weight = weight_in.contiguous();
    const int64_t d = x.size(-1), rows = x.numel() / std::max<int64_t>(d, 1);
    auto y = torch::empty(x.sizes(), x.options().dtype(out_dtype));
    auto inv_rms = torch::empty({rows}, x.options().dtype(at::toOpMathType(x.scalar_type())));
    dispatch(x.scalar_type(), out_dtype, [&](auto t, auto o) {
      using T = decltype(t);
      using Out = decltype(o);
      at::parallel_for(0, rows, cpu::row_grain(d), [&](int64_t begin, int64_t end) {
        forward_range<T, Out>(x.data_ptr<T>(), weight.data_ptr<T>(), y.data_ptr<Out>(),
                              inv_rms.data_ptr<at::opmath_type<T>>(), begin, end, d, eps);
      });
    });
    ctx->save_for_backward({x, weight, inv_rms});
    return y;
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &x = saved[0], &weight = saved[1], &inv_rms = saved[2];
    const auto g = grads[0].contiguous();
    const int64_t d = x.size(-1), rows = inv_rms.numel();
    auto dx = torch::empty_like(x);
    auto dw_per_thread = torch::zeros({at::get_num_threads(), d}, inv_rms.options());
    dispatch(x.scalar_type(), g.scalar_type(), [&](auto t, auto o) {
      using T = decltype(t);
      using Out = decltype(o);
      at::parallel_for(0, rows, cpu::row_grain(d), [&](int64_t begin, int64_t end) {
        backward_range<T, Out>(
            g.data_ptr<Out>(), x.data_ptr<T>(), weight.data_ptr<T>(),
            inv_rms.data_ptr<at::opmath_type<T>>(), dx.data_ptr<T>(),
            dw_per_thread.data_ptr<at::opmath_type<T>>() + at::get_thread_num() * d, begin, end, d);
      });
    });
    return {dx, dw_per_thread.sum(0).to(weight.scalar_type()), torch::Tensor(), torch::Tensor()};
  }
};

bool kernel_covers(const torch::Tensor& x, const torch::Tensor& weight, c10::ScalarType out) {
  return cpu::loops_cover(x) && weight.device().is_cpu() &&
         weight.scalar_type() == x.scalar_type() &&
         (out == x.scalar_type() || out == torch::kBFloat16) && x.dim() >= 1;
}

}  // namespace

torch::Tensor rms_norm(const torch::Tensor& x, const torch::Tensor& weight, double eps,
                       c10::ScalarType out_dtype) {
  if (!kernel_covers(x, weight, out_dtype)) return rms_norm_reference(x, weight, eps, out_dtype);
  return RmsNormFunction::apply(x, weight, eps, out_dtype);
}

torch::Tensor rms_norm_reference(const torch::Tensor& x, const torch::Tensor& weight, double eps,
                                 c10::ScalarType out_dtype) {
  const auto x_stat = x.scalar_type() == torch::kBFloat16 || x.scalar_type() == torch::kHalf
                          ? x.to(torch::kFloat32)
                          : x;
  const auto inv_rms = torch::rsqrt(x_stat.pow(2).mean(-1, /*keepdim=*/true) + eps);
  return (x_stat * inv_rms * weight.to(x_stat.scalar_type())).to(out_dtype);
}

}  // namespace moelab
