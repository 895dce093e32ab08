#include "kernels/grouped_matmul_f32.h"

#include "kernels/grouped_gemm.h"
#include "kernels/transpose_16x16.h"
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
      // The next tile's A rows (R rows on, as run_tiles goes), a line each per
      // 16 steps: in L1 when that tile starts.
      if (p % 16 == 0) {
        for (int r = 0; r < R; ++r) {
          _mm_prefetch(reinterpret_cast<const char*>(a + (R + r) * row_step + p * k_step),
                       _MM_HINT_T0);
        }
      }
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

// out (row stride out_stride) = the transpose of m[rows, cols] (row stride
// m_stride), both multiples of 16: 16 x 16 blocks transposed in registers,
// where LibTorch's copy of a transposed view runs at a fraction of a plain
// copy's pace.
MOELAB_F32_TARGET void transpose_into(const float* m, int64_t rows, int64_t cols, int64_t m_stride,
                                      float* out, int64_t out_stride) {
  for (int64_t i0 = 0; i0 < rows; i0 += 16) {
    for (int64_t j0 = 0; j0 < cols; j0 += 16) {
      __m512i r[16];
      for (int q = 0; q < 16; ++q) {
        r[q] = _mm512_loadu_si512(m + (i0 + q) * m_stride + j0);
      }
      cpu::store_transposed(r, out + j0 * out_stride + i0, out_stride);
    }
  }
}

// The weight parts [E, K, N_i] side by side as one contiguous [E, K, N]: B's
// rows must be contiguous. A part that is a transposed view of a contiguous
// [E, N_i, K] (an expert stack) is transposed 16 x 16 at a time.
torch::Tensor joined_rows(at::TensorList parts) {
  const auto& first = parts.front();
  if (parts.size() == 1 && first.is_contiguous()) return first;
  const int64_t groups = first.size(0), k = first.size(1);
  int64_t n = 0;
  for (const auto& w : parts) n += w.size(2);
  auto b = torch::empty({groups, k, n}, first.options());
  int64_t column = 0;
  for (const auto& w : parts) {
    const int64_t width = w.size(2);
    if (w.stride(1) == 1 && w.stride(2) == k && w.stride(0) == k * width && width % 16 == 0) {
      const float* m = w.data_ptr<float>();
      float* out = b.data_ptr<float>() + column;
      at::parallel_for(0, groups, 1, [&](int64_t begin, int64_t end) {
        for (int64_t g = begin; g < end; ++g) {
          transpose_into(m + g * width * k, width, k, k, out + g * k * n, n);
        }
      });
    } else {
      b.narrow(2, column, width).copy_(w);
    }
    column += width;
  }
  return b;
}

// y[rows, N] = group g's rows of x[rows, K] (contiguous) times b[g]
// (contiguous [E, K, N]).
torch::Tensor grouped_gemms(const torch::Tensor& x, const torch::Tensor& b,
                            const std::vector<int64_t>& counts) {
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

// dx = dy times the parts' transposes [E, N_i, K] (for the experts' gate and
// up, their stacks as they are) joined along N into one [E, N, K]: one
// reduction over all of dy's columns, where a pass per part would read and
// write dx again for each further part.
torch::Tensor input_grad_kernel(const torch::Tensor& dy, at::TensorList parts,
                                const std::vector<int64_t>& counts) {
  std::vector<torch::Tensor> stacks;
  for (const auto& w : parts) stacks.push_back(w.transpose(1, 2));
  const auto b = stacks.size() == 1 ? stacks.front().contiguous() : torch::cat(stacks, 1);
  return grouped_gemms(dy, b, counts);
}

// The gradient of each part, dw_i[g] = x_g^T dy_g over the part's columns of
// dy ([E, K, N_i]), computed as its transpose dy_g^T x_g, contiguous
// [E, N_i, K]: the parts are transposed views of [E, out, in] stacks, so their
// gradients then reach the stacks without a copy. A group without rows gets
// zeros (a tile over no reduction).
std::vector<torch::Tensor> weight_grad_kernel(const torch::Tensor& x, const torch::Tensor& dy,
                                              const std::vector<int64_t>& counts,
                                              at::TensorList parts) {
  const int64_t k = x.size(1), n = dy.size(1);
  const auto starts = grouped_gemm::group_starts(counts);
  std::vector<torch::Tensor> grads;
  std::vector<Gemm32> gemms;
  int64_t column = 0;  // of dy: the part's first
  for (const auto& w : parts) {
    const int64_t width = w.size(2);
    auto grad_t = torch::empty({static_cast<int64_t>(counts.size()), width, k}, dy.options());
    for (size_t g = 0; g < counts.size(); ++g) {
      gemms.push_back({dy.data_ptr<float>() + starts[g] * n + column, 1, n, width, counts[g],
                       x.data_ptr<float>() + starts[g] * k,
                       grad_t.data_ptr<float>() + static_cast<int64_t>(g) * width * k});
    }
    grads.push_back(grad_t.transpose(1, 2));
    column += width;
  }
  grouped_gemm::run_tiles(gemms, k, f32_tiles);
  return grads;
}

class GroupedMatmulF32Function : public torch::autograd::Function<GroupedMatmulF32Function> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x,
                               const at::TensorList& parts, const std::vector<int64_t>& counts) {
    std::vector<torch::Tensor> saved{x};
    saved.insert(saved.end(), parts.begin(), parts.end());
    ctx->save_for_backward(saved);
    ctx->saved_data["counts"] = counts;
    return grouped_gemms(x, joined_rows(parts), counts);
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto& x = saved[0];
    const std::vector<torch::Tensor> parts(saved.begin() + 1, saved.end());
    const auto counts = ctx->saved_data["counts"].toIntVector();
    const auto dy = grads[0].contiguous();
    tensor_list out(parts.size() + 2);
    if (ctx->needs_input_grad(0)) out[0] = input_grad_kernel(dy, parts, counts);
    bool any_weight_grad = false;
    for (size_t i = 0; i < parts.size(); ++i) any_weight_grad |= ctx->needs_input_grad(i + 1);
    if (!any_weight_grad) return out;
    const auto weight_grads = weight_grad_kernel(x, dy, counts, parts);
    for (size_t i = 0; i < parts.size(); ++i) {
      if (ctx->needs_input_grad(i + 1)) out[i + 1] = weight_grads[i];
    }
    return out;
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

bool grouped_matmul_f32_takes(const torch::Tensor& x, at::TensorList w_parts) {
  int64_t n = 0;
  for (const auto& w : w_parts) {
    if (w.scalar_type() != torch::kFloat || !w.is_cpu() || w.size(1) != x.size(1)) return false;
    n += w.size(2);
  }
  return grouped_matmul_f32_available() && x.scalar_type() == torch::kFloat && x.is_cpu() &&
         x.size(1) % 16 == 0 && n % 16 == 0;
}

torch::Tensor grouped_matmul_f32(const torch::Tensor& x, at::TensorList w_parts,
                                 const std::vector<int64_t>& counts) {
#ifdef MOELAB_BF16_DOT_KERNEL
  TORCH_CHECK(grouped_matmul_f32_takes(x, w_parts),
              "grouped_matmul_f32: fp32 CPU tensors with K and N multiples of 16 on an AVX-512F "
              "CPU expected");
  return GroupedMatmulF32Function::apply(x.contiguous(), w_parts, counts);
#else
  TORCH_CHECK(false, "grouped_matmul_f32: built without the x86-64 kernels");
#endif
}

}  // namespace moelab
