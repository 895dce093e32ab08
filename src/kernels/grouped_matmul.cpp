#include "kernels/grouped_matmul.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <numeric>

#include "kernels/grouped_gemm.h"
#include "kernels/grouped_matmul_f32.h"
#include "util/cpu_features.h"

#ifdef MOELAB_BF16_DOT_KERNEL
#include <immintrin.h>
#define MOELAB_BF16_DOT_TARGET __attribute__((target("avx512f,avx512bw,avx512bf16")))
#endif

namespace moelab {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

torch::Tensor grouped_mm_fallback(const torch::Tensor& x, const torch::Tensor& w,
                                  const std::vector<int64_t>& counts) {
  // Group g holds rows [ends[g - 1], ends[g]).
  std::vector<int32_t> ends;
  int64_t end = 0;
  for (int64_t c : counts) ends.push_back(static_cast<int32_t>(end += c));
  const auto offsets = torch::tensor(ends, torch::TensorOptions().dtype(torch::kInt32))
                           .to(x.device(), /*non_blocking=*/true);
  return at::_grouped_mm(x, w, offsets);
}

#ifdef MOELAB_BF16_DOT_KERNEL

using grouped_gemm::Gemm;
using grouped_gemm::group_starts;
using grouped_gemm::kAmxPairs;
using grouped_gemm::Word;

// Matrix m[i][j] = m[i * si + j * sj] of `rows` x `cols` as [ceil(rows / 2), cols]
// words: word (p, j) holds m[2p][j] and m[2p + 1][j] (zero past the last row).
MOELAB_BF16_DOT_TARGET void pack_row_pairs(const uint16_t* m, int64_t rows, int64_t cols,
                                           int64_t si, int64_t sj, Word* out) {
  for (int64_t p = 0; 2 * p < rows; ++p) {
    const uint16_t* lo = m + 2 * p * si;
    Word* o = out + p * cols;
    if (2 * p + 1 < rows && sj == 1) {  // contiguous rows: a loop that vectorises
      const uint16_t* hi = lo + si;
      for (int64_t j = 0; j < cols; ++j) o[j] = lo[j] | Word{hi[j]} << 16;
    } else if (2 * p + 1 < rows) {
      const uint16_t* hi = lo + si;
      for (int64_t j = 0; j < cols; ++j) o[j] = lo[j * sj] | Word{hi[j * sj]} << 16;
    } else {
      for (int64_t j = 0; j < cols; ++j) o[j] = lo[j * sj];
    }
  }
}

// An R x 16V tile of c, accumulated in fp32 registers over every pair, then
// rounded to bf16 (round to nearest even) once.
template <int R, int V>
struct Bf16DotTile {
  MOELAB_BF16_DOT_TARGET static void run(const Word* a, int64_t row_step, int64_t pair_step,
                                         const Word* b, int64_t n, int64_t pairs, uint16_t* c) {
    __m512 acc[R][V];
    for (int r = 0; r < R; ++r) {
      for (int v = 0; v < V; ++v) acc[r][v] = _mm512_setzero_ps();
    }
    for (int64_t p = 0; p < pairs; ++p) {
      __m512bh bv[V];
      for (int v = 0; v < V; ++v) bv[v] = (__m512bh)_mm512_loadu_si512(b + p * n + 16 * v);
      for (int r = 0; r < R; ++r) {
        const auto av =
            (__m512bh)_mm512_set1_epi32(static_cast<int>(a[r * row_step + p * pair_step]));
        for (int v = 0; v < V; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], av, bv[v]);
      }
    }
    for (int r = 0; r < R; ++r) {
      for (int v = 0; v < V; ++v) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(c + r * n + 16 * v),
                            (__m256i)_mm512_cvtneps_pbh(acc[r][v]));
      }
    }
  }
};

constexpr auto bf16_tiles = grouped_gemm::tile_table<Bf16DotTile>();

// Every GEMM (all with n columns, a multiple of 16) on AMX tiles where it can,
// else on AVX512-BF16 tiles.
void run_gemms(const std::vector<Gemm>& gemms, int64_t n, bool amx) {
  if (amx && std::all_of(gemms.begin(), gemms.end(),
                         [](const Gemm& g) { return g.k_step == 1 && g.k % kAmxPairs == 0; })) {
    return grouped_gemm::run_gemms_amx(gemms, n);
  }
  grouped_gemm::run_tiles(gemms, n, bf16_tiles);
}

const uint16_t* bits(const torch::Tensor& t) {
  return reinterpret_cast<const uint16_t*>(t.data_ptr<c10::BFloat16>());
}

MOELAB_BF16_DOT_TARGET void pack_transposed_pairs(const uint16_t* m, int64_t rows, int64_t cols,
                                                  int64_t sj, Word* out);

// Group g's weight [K, N] as pairs of rows (pack_row_pairs). A transposed view
// of an [N, K] matrix (the experts' [E, out, in] stacks) already holds each pair
// in one word: transposed as words, 16 x 16 at a time.
void pack_weight(const torch::Tensor& w, int64_t g, Word* out) {
  const int64_t k = w.size(1), n = w.size(2);
  const uint16_t* m = bits(w) + g * w.stride(0);
  const bool word_aligned = reinterpret_cast<std::uintptr_t>(m) % sizeof(Word) == 0;
  if (w.stride(1) == 1 && w.stride(2) % 2 == 0 && k % 2 == 0 && word_aligned) {
    return pack_transposed_pairs(m, k, n, w.stride(2), out);
  }
  pack_row_pairs(m, k, n, w.stride(1), w.stride(2), out);
}

// y[rows, N] = group g's rows of x[rows, K] times w[g] ([E, K, N], any strides).
torch::Tensor forward_kernel(const torch::Tensor& x, const torch::Tensor& w,
                             const std::vector<int64_t>& counts, bool amx) {
  const int64_t groups = w.size(0), k = w.size(1), n = w.size(2), pairs = k / 2;
  auto packed = torch::empty({groups, pairs, n}, x.options().dtype(torch::kInt32));
  auto* packed_words = reinterpret_cast<Word*>(packed.data_ptr<int32_t>());
  at::parallel_for(0, groups, 1, [&](int64_t begin, int64_t end) {
    for (int64_t g = begin; g < end; ++g) {
      pack_weight(w, g, packed_words + g * pairs * n);
    }
  });
  auto y = torch::empty({x.size(0), n}, x.options());
  const auto starts = group_starts(counts);
  const auto* x_words = reinterpret_cast<const Word*>(bits(x));
  auto* y_bits = reinterpret_cast<uint16_t*>(y.data_ptr<c10::BFloat16>());
  std::vector<Gemm> gemms;
  for (int64_t g = 0; g < groups; ++g) {
    gemms.push_back({x_words + starts[g] * pairs, pairs, 1, counts[g], pairs,
                     packed_words + g * pairs * n, y_bits + starts[g] * n});
  }
  run_gemms(gemms, n, amx);
  return y;
}

// GCC 12 warns of the self-initialised "undefined" vectors inside the
// intrinsics' headers once inlined here (a false positive).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

// out[j * stride + q] = r[q][j] for a 16 x 16 block of words r[q] (16 each):
// pairs of 32-bit words, then of 64-bit words, then 128-bit lanes swapped.
MOELAB_BF16_DOT_TARGET void store_transposed(const __m512i (&r)[16], Word* out, int64_t stride) {
  __m512i a[16], b[16];
  for (int i = 0; i < 16; i += 2) {
    a[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
    a[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  }
  // b[4i + c], lane L: column 4L + c of rows 4i .. 4i + 3.
  for (int i = 0; i < 16; i += 4) {
    b[i] = _mm512_unpacklo_epi64(a[i], a[i + 2]);
    b[i + 1] = _mm512_unpackhi_epi64(a[i], a[i + 2]);
    b[i + 2] = _mm512_unpacklo_epi64(a[i + 1], a[i + 3]);
    b[i + 3] = _mm512_unpackhi_epi64(a[i + 1], a[i + 3]);
  }
  for (int c = 0; c < 4; ++c) {
    const __m512i s0 = _mm512_shuffle_i32x4(b[c], b[4 + c], 0x44);
    const __m512i s1 = _mm512_shuffle_i32x4(b[c], b[4 + c], 0xEE);
    const __m512i s2 = _mm512_shuffle_i32x4(b[8 + c], b[12 + c], 0x44);
    const __m512i s3 = _mm512_shuffle_i32x4(b[8 + c], b[12 + c], 0xEE);
    _mm512_storeu_si512(out + c * stride, _mm512_shuffle_i32x4(s0, s2, 0x88));
    _mm512_storeu_si512(out + (4 + c) * stride, _mm512_shuffle_i32x4(s0, s2, 0xDD));
    _mm512_storeu_si512(out + (8 + c) * stride, _mm512_shuffle_i32x4(s1, s3, 0x88));
    _mm512_storeu_si512(out + (12 + c) * stride, _mm512_shuffle_i32x4(s1, s3, 0xDD));
  }
}

// pack_row_pairs of m[i][j] = m[i + j * sj] (rows even, cols a multiple of 16,
// m 4-byte aligned): word (p, j) is the word at m + j * sj + 2p.
MOELAB_BF16_DOT_TARGET void pack_transposed_pairs(const uint16_t* m, int64_t rows, int64_t cols,
                                                  int64_t sj, Word* out) {
  const int64_t pairs = rows / 2, full = pairs / 16 * 16;
  const auto* words = reinterpret_cast<const Word*>(m);
  const int64_t step = sj / 2;
  for (int64_t j0 = 0; j0 < cols; j0 += 16) {
    for (int64_t p0 = 0; p0 < full; p0 += 16) {
      __m512i r[16];
      for (int q = 0; q < 16; ++q) r[q] = _mm512_loadu_si512(words + (j0 + q) * step + p0);
      store_transposed(r, out + p0 * cols + j0, cols);
    }
    for (int64_t p = full; p < pairs; ++p) {
      for (int64_t j = j0; j < j0 + 16; ++j) out[p * cols + j] = words[j * step + p];
    }
  }
}

// Columns j0 .. j0 + 15 of row i of m (row stride si) as 32-bit words, zeros
// past the last row.
MOELAB_BF16_DOT_TARGET __m512i widened_row(const uint16_t* m, int64_t i, int64_t rows, int64_t si,
                                           int64_t j0) {
  static const uint16_t zeros[16] = {};
  const uint16_t* at = i < rows ? m + i * si + j0 : zeros;
  return _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(at)));
}

// Matrix m (as in pack_row_pairs, its columns contiguous, cols a multiple of
// 16) transposed into [cols, pairs] words: word (j, p) holds m[2p][j] and
// m[2p + 1][j], zero past the last row. AMX's A operand for the weight
// gradient, whose rows must hold their pairs in a row. In blocks of 16 pairs x
// 16 columns, transposed in registers, rows past the last read as zeros (every
// group ends in such a block, and a fine-grained layer has many groups); a
// block past `pairs` (never, when pairs is a multiple of 16), by word.
MOELAB_BF16_DOT_TARGET void pack_column_pairs(const uint16_t* m, int64_t rows, int64_t cols,
                                              int64_t si, int64_t pairs, Word* out) {
  for (int64_t p0 = 0; p0 < pairs; p0 += 16) {
    for (int64_t j0 = 0; j0 < cols; j0 += 16) {
      if (p0 + 16 <= pairs) {
        __m512i r[16];
        for (int q = 0; q < 16; ++q) {
          const int64_t lo = 2 * (p0 + q);
          r[q] = _mm512_or_si512(widened_row(m, lo, rows, si, j0),
                                 _mm512_slli_epi32(widened_row(m, lo + 1, rows, si, j0), 16));
        }
        store_transposed(r, out + j0 * pairs + p0, pairs);
        continue;
      }
      for (int64_t j = j0; j < j0 + 16; ++j) {
        for (int64_t p = p0; p < pairs; ++p) {
          const Word lo = 2 * p < rows ? m[2 * p * si + j] : 0;
          const Word hi = 2 * p + 1 < rows ? m[(2 * p + 1) * si + j] : 0;
          out[j * pairs + p] = lo | hi << 16;
        }
      }
    }
  }
}
#pragma GCC diagnostic pop

// dw[g] = x_g^T dy_g: [E, K, N], reducing over each group's rows. Computed as
// its transpose dy_g^T x_g, contiguous [E, N, K]: the weights are transposed
// views of [E, out, in] stacks, so their gradient then reaches the stack
// without a copy.
torch::Tensor weight_grad_kernel(const torch::Tensor& x, const torch::Tensor& dy,
                                 const std::vector<int64_t>& counts, bool amx) {
  const int64_t groups = static_cast<int64_t>(counts.size()), k = x.size(1), n = dy.size(1);
  // AMX reduces over 16 pairs per tile, so there each group's pairs are padded
  // with zero pairs to a multiple of 16, and dy_g^T is packed row by row.
  const int64_t align = amx ? kAmxPairs : 1;
  // Group g's row pairs start at word row pair_starts[g] of the packed operands.
  std::vector<int64_t> pair_starts(groups + 1, 0);
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t pairs = (counts[g] + 1) / 2;
    pair_starts[g + 1] = pair_starts[g] + (pairs + align - 1) / align * align;
  }
  const auto starts = group_starts(counts);
  const auto words = x.options().dtype(torch::kInt32);
  auto x_packed = torch::empty({pair_starts.back(), k}, words);
  auto dy_packed = torch::empty({pair_starts.back(), n}, words);
  auto* xw = reinterpret_cast<Word*>(x_packed.data_ptr<int32_t>());
  auto* dyw = reinterpret_cast<Word*>(dy_packed.data_ptr<int32_t>());
  at::parallel_for(0, groups, 1, [&](int64_t begin, int64_t end) {
    for (int64_t g = begin; g < end; ++g) {
      const int64_t pairs = pair_starts[g + 1] - pair_starts[g], used = (counts[g] + 1) / 2;
      Word* x_g = xw + pair_starts[g] * k;
      pack_row_pairs(bits(x) + starts[g] * k, counts[g], k, k, 1, x_g);
      std::fill(x_g + used * k, x_g + pairs * k, Word{0});
      if (amx) {
        pack_column_pairs(bits(dy) + starts[g] * n, counts[g], n, n, pairs,
                          dyw + pair_starts[g] * n);
      } else {
        pack_row_pairs(bits(dy) + starts[g] * n, counts[g], n, n, 1, dyw + pair_starts[g] * n);
      }
    }
  });
  auto dw_t = torch::empty({groups, n, k}, dy.options());
  auto* dw_bits = reinterpret_cast<uint16_t*>(dw_t.data_ptr<c10::BFloat16>());
  std::vector<Gemm> gemms;
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t pairs = pair_starts[g + 1] - pair_starts[g];
    // A = dy_g^T: row i of A is column i of dy_g; its pair p is the packed word
    // (i, p) on AMX, (p, i) otherwise.
    const int64_t row_step = amx ? pairs : 1, pair_step = amx ? 1 : n;
    gemms.push_back({dyw + pair_starts[g] * n, row_step, pair_step, n, pairs,
                     xw + pair_starts[g] * k, dw_bits + g * n * k});
  }
  run_gemms(gemms, k, amx);
  return dw_t.transpose(1, 2);
}

class GroupedMatmulFunction : public torch::autograd::Function<GroupedMatmulFunction> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& w,
                               const std::vector<int64_t>& counts, bool amx) {
    ctx->save_for_backward({x, w});
    ctx->saved_data["counts"] = counts;
    ctx->saved_data["amx"] = amx;
    return forward_kernel(x, w, counts, amx);
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto& x = saved[0];
    const auto& w = saved[1];
    const auto counts = ctx->saved_data["counts"].toIntVector();
    const bool amx = ctx->saved_data["amx"].toBool();
    const auto dy = grads[0].contiguous();
    torch::Tensor dx, dw;
    if (ctx->needs_input_grad(0)) dx = forward_kernel(dy, w.transpose(1, 2), counts, amx);
    if (ctx->needs_input_grad(1)) dw = weight_grad_kernel(x, dy, counts, amx);
    return {dx, dw, torch::Tensor(), torch::Tensor()};
  }
};

#endif  // MOELAB_BF16_DOT_KERNEL

}  // namespace

bool grouped_matmul_has_cpu_kernel(torch::ScalarType dtype) {
  if (dtype == torch::kFloat) return grouped_matmul_f32_available();
#ifdef MOELAB_BF16_DOT_KERNEL
  return dtype == torch::kBFloat16 && cpu_features().avx512_bf16;
#else
  return false;
#endif
}

bool grouped_matmul_has_amx() {
#ifdef MOELAB_BF16_DOT_KERNEL
  return grouped_matmul_has_cpu_kernel(torch::kBFloat16) && grouped_gemm::amx_usable();
#else
  return false;
#endif
}

bool grouped_matmul_cpu_kernel_fits(torch::ScalarType dtype, int64_t k, int64_t n) {
  return grouped_matmul_has_cpu_kernel(dtype) && k % 16 == 0 && n % 16 == 0;
}

torch::Tensor grouped_matmul(const torch::Tensor& x, const torch::Tensor& w,
                             const std::vector<int64_t>& counts, CpuTiles tiles) {
  TORCH_CHECK(x.dim() == 2 && w.dim() == 3 && x.size(1) == w.size(1) &&
                  static_cast<int64_t>(counts.size()) == w.size(0),
              "grouped_matmul: x [rows, K], w [groups, K, N] and one count per group expected, "
              "got x ",
              x.sizes(), ", w ", w.sizes(), " and ", counts.size(), " counts");
  TORCH_CHECK(std::all_of(counts.begin(), counts.end(), [](int64_t c) { return c >= 0; }) &&
                  std::accumulate(counts.begin(), counts.end(), int64_t{0}) == x.size(0),
              "grouped_matmul: the group counts must be >= 0 and sum to x's ", x.size(0), " rows");
#ifdef MOELAB_BF16_DOT_KERNEL
  const bool bf16 = x.scalar_type() == torch::kBFloat16 && w.scalar_type() == torch::kBFloat16;
  if (bf16 && x.is_cpu() &&
      grouped_matmul_cpu_kernel_fits(torch::kBFloat16, w.size(1), w.size(2))) {
    const bool amx = tiles == CpuTiles::kBest && grouped_matmul_has_amx();
    return GroupedMatmulFunction::apply(x.contiguous(), w, counts, amx);
  }
#endif
  if (x.is_cpu() && w.scalar_type() == torch::kFloat &&
      grouped_matmul_cpu_kernel_fits(x.scalar_type(), w.size(1), w.size(2))) {
    return grouped_matmul_f32(x, w, counts);
  }
  return grouped_mm_fallback(x, w, counts);
}

torch::Tensor grouped_matmul_reference(const torch::Tensor& x, const torch::Tensor& w,
                                       const std::vector<int64_t>& counts) {
  const auto parts = x.split_with_sizes(counts, 0);
  std::vector<torch::Tensor> outputs;
  for (size_t g = 0; g < parts.size(); ++g) {
    outputs.push_back(parts[g].mm(w[static_cast<int64_t>(g)]));
  }
  return torch::cat(outputs, 0);
}

}  // namespace moelab
