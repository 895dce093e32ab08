#include "kernels/top_k.h"

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/topk.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "kernels/transpose_16x16.h"
#include "util/cpu_features.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define MOELAB_TOP_K_AVX512 1
#endif

namespace moelab {
namespace {

template <typename T>
bool ranks_above(T a, T b) {
  return a > b || (std::isnan(a) && !std::isnan(b));
}

// Keeps the best k seen so far in order; a value enters only by ranking
// strictly above one of them, so among equals the first seen stays ahead.
template <typename T>
void top_k_row(const T* v, int64_t cols, int64_t k, T* best, int64_t* index) {
  int64_t filled = 0;
  for (int64_t j = 0; j < cols; ++j) {
    if (filled == k && !ranks_above(v[j], best[k - 1])) continue;
    int64_t at = filled < k ? filled++ : k - 1;
    for (; at > 0 && ranks_above(v[j], best[at - 1]); --at) {
      best[at] = best[at - 1];
      index[at] = index[at - 1];
    }
    best[at] = v[j];
    index[at] = j;
  }
}

#ifdef MOELAB_TOP_K_AVX512
constexpr int64_t kMaxVectors = 16;  // rows of up to 256 values

// GCC 12 warns of the self-initialised "undefined" vectors inside the
// intrinsics' headers once inlined here (a false positive).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

// One fp32 row of at most 16 * kMaxVectors values held in registers: k rounds,
// each taking the largest value not yet taken (the lowest index among equals,
// as top_k_row) without a branch per value. False, with nothing written, for a
// row holding a NaN, whose order max instructions do not keep.
__attribute__((target("avx512f"))) bool top_k_row_avx512(const float* v, int64_t cols, int64_t k,
                                                         int64_t* index) {
  const int64_t vectors = (cols + 15) / 16;
  const __m512 lowest = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  __m512 x[kMaxVectors];
  __mmask16 open[kMaxVectors];  // the lanes inside the row not yet taken
  __mmask16 nan = 0;
  for (int64_t q = 0; q < vectors; ++q) {
    const int64_t lanes = std::min<int64_t>(16, cols - 16 * q);
    open[q] = static_cast<__mmask16>((1u << lanes) - 1);
    x[q] = _mm512_mask_loadu_ps(lowest, open[q], v + 16 * q);
    nan |= _mm512_cmp_ps_mask(x[q], x[q], _CMP_UNORD_Q);
  }
  if (nan != 0) return false;
  for (int64_t r = 0; r < k; ++r) {
    __m512 best = lowest;
    for (int64_t q = 0; q < vectors; ++q) best = _mm512_mask_max_ps(best, open[q], best, x[q]);
    const __m512 top = _mm512_set1_ps(_mm512_reduce_max_ps(best));
    for (int64_t q = 0; q < vectors; ++q) {
      const __mmask16 hit = _mm512_mask_cmpeq_ps_mask(open[q], x[q], top);
      if (hit == 0) continue;
      const int lane = __builtin_ctz(hit);
      index[r] = 16 * q + lane;
      open[q] = static_cast<__mmask16>(open[q] & ~(1u << lane));
      break;
    }
  }
  return true;
}

constexpr int64_t kLanes = 16;
constexpr int64_t kMaxLaneK = 12;  // 2k best vectors, the column and the rest in 32 registers

// kLanes rows at once, one per lane (k <= kMaxLaneK, each row at most 16 *
// kMaxVectors values): the rows transposed 16 x 16 at a time so that each
// column is one vector, then each column inserted into every lane's best k in
// order, below the values it does not strictly exceed (so the lower index
// stays ahead among equals, as top_k_row). The slots start as NaN, which any
// value displaces (an unordered compare). No branch per value, where one row
// at a time pays a search for each of its k picks. False, with nothing
// written, when a row holds a NaN.
__attribute__((target("avx512f"))) bool top_k_lanes_avx512(const float* v, int64_t cols, int64_t k,
                                                           int64_t* index) {
  alignas(64) float column[16 * kMaxVectors][kLanes];
  const __m512 lowest = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  __mmask16 nan = 0;
  for (int64_t j0 = 0; j0 < cols; j0 += 16) {
    const auto in_row = static_cast<__mmask16>((1u << std::min<int64_t>(16, cols - j0)) - 1);
    __m512i r[kLanes];
    for (int64_t q = 0; q < kLanes; ++q) {
      const __m512 x = _mm512_mask_loadu_ps(lowest, in_row, v + q * cols + j0);
      nan |= _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
      r[q] = _mm512_castps_si512(x);
    }
    cpu::store_transposed(r, &column[j0][0], kLanes);
  }
  if (nan != 0) return false;
  __m512 best[kMaxLaneK];
  __m512i at[kMaxLaneK];
  for (int64_t s = 0; s < k; ++s) {
    best[s] = _mm512_set1_ps(std::numeric_limits<float>::quiet_NaN());
    at[s] = _mm512_setzero_si512();
  }
  for (int64_t j = 0; j < cols; ++j) {
    __m512 x = _mm512_load_ps(&column[j][0]);
    __m512i xi = _mm512_set1_epi32(static_cast<int32_t>(j));
    for (int64_t s = 0; s < k; ++s) {
      const __mmask16 above = _mm512_cmp_ps_mask(x, best[s], _CMP_NLE_UQ);
      const __m512 b = best[s];
      const __m512i bi = at[s];
      best[s] = _mm512_mask_blend_ps(above, b, x);
      at[s] = _mm512_mask_blend_epi32(above, bi, xi);
      x = _mm512_mask_blend_ps(above, x, b);
      xi = _mm512_mask_blend_epi32(above, xi, bi);
    }
  }
  alignas(64) int32_t picked[kMaxLaneK][kLanes];
  for (int64_t s = 0; s < k; ++s) _mm512_store_si512(picked[s], at[s]);
  for (int64_t q = 0; q < kLanes; ++q) {
    for (int64_t s = 0; s < k; ++s) index[q * k + s] = picked[s][q];
  }
  return true;
}
#pragma GCC diagnostic pop

// Whether fp32 rows this wide fit the registers on this CPU.
bool rows_fit_registers(int64_t cols) {
  return cols <= 16 * kMaxVectors && cpu_features().avx512f;
}
#endif

// Row by row: in registers where the CPU has AVX-512 and the row fits and holds
// no NaN; else top_k_row.
template <typename T>
void top_k_each_row(const T* v, int64_t begin, int64_t end, int64_t cols, int64_t k,
                    int64_t* index) {
#ifdef MOELAB_TOP_K_AVX512
  const bool registers = std::is_same_v<T, float> && rows_fit_registers(cols);
#endif
  std::vector<T> best(k);
  for (int64_t r = begin; r < end; ++r) {
#ifdef MOELAB_TOP_K_AVX512
    if constexpr (std::is_same_v<T, float>) {
      if (registers && top_k_row_avx512(v + r * cols, cols, k, index + r * k)) continue;
    }
#endif
    top_k_row(v + r * cols, cols, k, best.data(), index + r * k);
  }
}

// kLanes rows at a time where top_k_lanes_avx512 takes them, the rest (and a
// block holding a NaN) row by row.
template <typename T>
void top_k_rows(const T* v, int64_t begin, int64_t end, int64_t cols, int64_t k, int64_t* index) {
  int64_t r = begin;
#ifdef MOELAB_TOP_K_AVX512
  if constexpr (std::is_same_v<T, float>) {
    const bool lanes = k <= kMaxLaneK && rows_fit_registers(cols);
    for (; lanes && r + kLanes <= end; r += kLanes) {
      if (!top_k_lanes_avx512(v + r * cols, cols, k, index + r * k)) {
        top_k_each_row(v, r, r + kLanes, cols, k, index);
      }
    }
  }
#endif
  top_k_each_row(v, r, end, cols, k, index);
}

}  // namespace

at::Tensor top_k_indices(const at::Tensor& values_RC, int64_t k) {
  TORCH_CHECK(values_RC.dim() == 2 && k >= 1 && k <= values_RC.size(1),
              "top_k_indices: expected [rows, cols] values and 1 <= k <= cols, got ",
              values_RC.sizes(), " and k = ", k);
  const auto dtype = values_RC.scalar_type();
  if (!values_RC.is_cpu() || (dtype != at::kFloat && dtype != at::kDouble)) {
    return std::get<1>(values_RC.topk(k, -1));
  }
  const auto values = values_RC.contiguous();
  const int64_t rows = values.size(0), cols = values.size(1);
  auto index_RK = at::empty({rows, k}, values.options().dtype(at::kLong));
  AT_DISPATCH_FLOATING_TYPES(dtype, "top_k_indices", [&] {
    const scalar_t* v = values.data_ptr<scalar_t>();
    int64_t* index = index_RK.data_ptr<int64_t>();
    at::parallel_for(0, rows, 256, [&](int64_t begin, int64_t end) {
      top_k_rows(v, begin, end, cols, k, index);
    });
  });
  return index_RK;
}

}  // namespace moelab
