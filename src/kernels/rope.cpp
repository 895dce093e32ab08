#include "kernels/rope.h"

#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>

#include "kernels/cpu_loop.h"

namespace moelab {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

// Rotates rows [begin, end) of x (rows indexed by (b, h, s), strides in elements)
// into the contiguous y. sign = -1 rotates backwards: the backward pass.
template <typename T>
MOELAB_CPU_CLONES void rotate_range(const T* x, const int64_t* sizes, const int64_t* strides,
                                    const at::opmath_type<T>* cos, const at::opmath_type<T>* sin,
                                    at::opmath_type<T> sign, T* y, int64_t begin, int64_t end) {
  using Acc = at::opmath_type<T>;
  const int64_t heads = sizes[1], seq = sizes[2], hd = sizes[3], half = hd / 2;
  for (int64_t r = begin; r < end; ++r) {
    const int64_t s = r % seq, h = (r / seq) % heads, b = r / (seq * heads);
    const T* xr = x + b * strides[0] + h * strides[1] + s * strides[2];
    const Acc* c = cos + s * hd;
    const Acc* sn = sin + s * hd;
    T* yr = y + r * hd;
#pragma omp simd
    for (int64_t i = 0; i < half; ++i) {
      const Acc x1 = cpu::load(xr, i), x2 = cpu::load(xr, i + half), si = sign * sn[i];
      cpu::store(yr, i, x1 * c[i] - x2 * si);
      cpu::store(yr, i + half, x2 * c[i] + x1 * si);
    }
  }
}

torch::Tensor rotate(const torch::Tensor& x_in, const torch::Tensor& cos, const torch::Tensor& sin,
                     int sign) {
  const auto x = x_in.stride(3) == 1 ? x_in : x_in.contiguous();
  auto y = torch::empty(x.sizes(), x.options().memory_format(torch::MemoryFormat::Contiguous));
  AT_DISPATCH_FLOATING_TYPES_AND(at::kBFloat16, x.scalar_type(), "rope", [&] {
    const int64_t rows = x.size(0) * x.size(1) * x.size(2);
    at::parallel_for(0, rows, cpu::row_grain(x.size(3)), [&](int64_t begin, int64_t end) {
      rotate_range<scalar_t>(x.data_ptr<scalar_t>(), x.sizes().data(), x.strides().data(),
                             cos.data_ptr<at::opmath_type<scalar_t>>(),
                             sin.data_ptr<at::opmath_type<scalar_t>>(), sign,
                             y.data_ptr<scalar_t>(), begin, end);
    });
  });
  return y;
}

struct RopeFunction : torch::autograd::Function<RopeFunction> {
  // cos and sin: the first S rows in x's math dtype, contiguous.
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& cos, const torch::Tensor& sin) {
    ctx->save_for_backward({cos, sin});
    return rotate(x, cos, sin, 1);
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    return {rotate(grads[0], saved[0], saved[1], -1), torch::Tensor(), torch::Tensor()};
  }
};

bool kernel_covers(const torch::Tensor& x) {
  return cpu::loops_cover(x) && x.dim() == 4 && x.size(3) % 2 == 0;
}

}  // namespace

torch::Tensor rope(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin) {
  if (!kernel_covers(x)) return rope_reference(x, cos, sin);
  const auto math = at::toOpMathType(x.scalar_type());
  const int64_t seq = x.size(2);
  return RopeFunction::apply(x, cos.slice(0, 0, seq).to(math).contiguous(),
                             sin.slice(0, 0, seq).to(math).contiguous());
}

torch::Tensor rope_reference(const torch::Tensor& x, const torch::Tensor& cos,
                             const torch::Tensor& sin) {
  const int64_t seq = x.size(2), half = x.size(3) / 2;
  const auto c = cos.slice(0, 0, seq).to(x.device(), x.scalar_type());
  const auto s = sin.slice(0, 0, seq).to(x.device(), x.scalar_type());
  const auto rotated = torch::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
  return x * c + rotated * s;
}

}  // namespace moelab
