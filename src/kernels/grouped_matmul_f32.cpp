#include "kernels/grouped_matmul_f32.h"

#include "kernels/grouped_gemm.h"
#include "util/cpu_features.h"

#ifdef MOELAB_BF16_DOT_KERNEL
#include <immintrin.h>
#define MOELAB_F32_TARGET __attribute__((target("avx512f")))
#endif

namespace moelab {
namespace {

#ifdef MOELAB_BF16_DOT_KERNEL

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

using Gemm32 = grouped_gemm::TiledGemm<float, float>;

// An R x 16V tile of c, accumulated in registers over k steps, from zero or
// from the sums c holds.
template <int R, int V>
struct F32Tile {
  MOELAB_F32_TARGET static void run(const float* a, int64_t row_step, int64_t k_step,
                                    const float* b, int64_t k, float* c, int64_t n,
                                    bool accumulate) {
    __m512 acc[R][V];
    for (int r = 0; r < R; ++r) {
      for (int v = 0; v < V; ++v) {
        acc[r][v] = accumulate ? _mm512_loadu_ps(c + r * n + 16 * v) : _mm512_setzero_ps();
      }
    }
    for (int64_t p = 0; p < k; ++p) {
      __m512 bv[V];
      for (int v = 0; v < V; ++v) bv[v] = _mm512_loadu_ps(b + p * n + 16 * v);
      for (int r = 0; r < R; ++r) {
        const __m512 av = _mm512_set1_ps(a[r * row_step + p * k_step]);
        for (int v = 0; v < V; ++v) acc[r][v] = _mm512_fmadd_ps(av, bv[v], acc[r][v]);
      }
    }
    for (int r = 0; r < R; ++r) {
      for (int v = 0; v < V; ++v) _mm512_storeu_ps(c + r * n + 16 * v, acc[r][v]);
    }
  }
};

constexpr auto f32_tiles = grouped_gemm::tile_table<F32Tile>();

// y[rows, N] = group g's rows of x[rows, K] (contiguous) times w[g] ([E, K, N]).
torch::Tensor forward_kernel(const torch::Tensor& x, const torch::Tensor& w,
                             const std::vector<int64_t>& counts) {
  const torch::Tensor b = w.contiguous();  // B's rows must be contiguous
  const int64_t k = b.size(1), n = b.size(2);
  auto y = torch::empty({x.size(0), n}, x.options());
  const auto starts = grouped_gemm::group_starts(counts);
  std::vector<Gemm32> gemms;
  for (size_t g = 0; g < counts.size(); ++g) {
    gemms.push_back({x.data_ptr<float>() + starts[g] * k, k, 1, counts[g], k,
                     b.data_ptr<float>() + static_cast<int64_t>(g) * k * n,
                     y.data_ptr<float>() + starts[g] * n});
  }
  grouped_gemm::run_tiles(gemms, n, f32_tiles);
  return y;
}

// dw[g] = x_g^T dy_g ([E, K, N]), computed as its transpose dy_g^T x_g,
// contiguous [E, N, K]: the weights are transposed views of [E, out, in]
// stacks, so their gradient then reaches the stack without a copy. A group
// without rows gets zeros (a tile over no reduction).
torch::Tensor weight_grad_kernel(const torch::Tensor& x, const torch::Tensor& dy,
                                 const std::vector<int64_t>& counts) {
  const int64_t k = x.size(1), n = dy.size(1);
  const auto starts = grouped_gemm::group_starts(counts);
  auto dw_t = torch::empty({static_cast<int64_t>(counts.size()), n, k}, dy.options());
  std::vector<Gemm32> gemms;
  for (size_t g = 0; g < counts.size(); ++g) {
    gemms.push_back({dy.data_ptr<float>() + starts[g] * n, 1, n, n, counts[g],
                     x.data_ptr<float>() + starts[g] * k,
                     dw_t.data_ptr<float>() + static_cast<int64_t>(g) * n * k});
  }
  grouped_gemm::run_tiles(gemms, k, f32_tiles);
  return dw_t.transpose(1, 2);
}

class GroupedMatmulF32Function : public torch::autograd::Function<GroupedMatmulF32Function> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& w,
                               const std::vector<int64_t>& counts) {
    ctx->save_for_backward({x, w});
    ctx->saved_data["counts"] = counts;
    return forward_kernel(x, w, counts);
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto counts = ctx->saved_data["counts"].toIntVector();
    const auto dy = grads[0].contiguous();
    torch::Tensor dx, dw;
    if (ctx->needs_input_grad(0)) dx = forward_kernel(dy, saved[1].transpose(1, 2), counts);
    if (ctx->needs_input_grad(1)) dw = weight_grad_kernel(saved[0], dy, counts);
    return {dx, dw, torch::Tensor()};
  }
};

#endif  // MOELAB_BF16_DOT_KERNEL

}  // namespace

bool grouped_matmul_f32_available() {
#ifdef MOELAB_BF16_DOT_KERNEL
  return cpu_features().avx512f;
#else
  return false;
#endif
}

torch::Tensor grouped_matmul_f32(const torch::Tensor& x, const torch::Tensor& w,
                                 const std::vector<int64_t>& counts) {
#ifdef MOELAB_BF16_DOT_KERNEL
  TORCH_CHECK(grouped_matmul_f32_available() && x.scalar_type() == torch::kFloat &&
                  w.scalar_type() == torch::kFloat && x.is_cpu() && w.is_cpu() &&
                  w.size(1) % 16 == 0 && w.size(2) % 16 == 0,
              "grouped_matmul_f32: fp32 CPU tensors with K and N multiples of 16 on an AVX-512F "
              "CPU expected");
  return GroupedMatmulF32Function::apply(x.contiguous(), w, counts);
#else
  TORCH_CHECK(false, "grouped_matmul_f32: built without the x86-64 kernels");
#endif
}

}  // namespace moelab
