#include "kernels/grouped_matmul.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <numeric>
#include <type_traits>

#include "kernels/grouped_gemm.h"
#include "kernels/grouped_matmul_f32.h"
#include "kernels/transpose_16x16.h"
#include "util/cpu_features.h"

#ifdef MOELAB_BF16_DOT_KERNEL
#include <immintrin.h>
#define MOELAB_BF16_DOT_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))
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

using grouped_gemm::Bf16Gemm;
using grouped_gemm::group_starts;
using grouped_gemm::kAmxPairs;
using grouped_gemm::Word;

// Matrix m[i][j] = m[i * si + j * sj] of `rows` x `cols` as [ceil(rows / 2), cols]
// words, out_stride apart: word (p, j) holds m[2p][j] and m[2p + 1][j] (zero
// past the last row).
MOELAB_BF16_DOT_TARGET void pack_row_pairs(const uint16_t* m, int64_t rows, int64_t cols,
                                           int64_t si, int64_t sj, Word* out, int64_t out_stride) {
  for (int64_t p = 0; 2 * p < rows; ++p) {
    const uint16_t* lo = m + 2 * p * si;
    Word* o = out + p * out_stride;
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

// 16 accumulated fp32 values to c: rounded to bf16 (to nearest even) once, or
// as they are.
MOELAB_BF16_DOT_TARGET void store_tile_row(__m512 acc, uint16_t* c) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(c), (__m256i)_mm512_cvtneps_pbh(acc));
}
MOELAB_BF16_DOT_TARGET void store_tile_row(__m512 acc, float* c) {
  _mm512_storeu_ps(c, acc);
}

// An R x 16V tile of c, accumulated in fp32 registers over the pairs, from
// zero or from the sums an fp32 c holds, then stored (store_tile_row).
template <typename Out>
struct Bf16DotTiles {
  template <int R, int V>
  struct Tile {
    MOELAB_BF16_DOT_TARGET static void run(const Word* a, int64_t row_step, int64_t pair_step,
                                           const Word* b, int64_t pairs, Out* c, int64_t n,
                                           bool accumulate) {
      // run_tiles asks to accumulate only into an fp32 c.
      __m512 acc[R][V];
      for (int r = 0; r < R; ++r) {
        for (int v = 0; v < V; ++v) {
          if constexpr (std::is_same_v<Out, float>) {
            acc[r][v] = accumulate ? _mm512_loadu_ps(c + r * n + 16 * v) : _mm512_setzero_ps();
          } else {
            acc[r][v] = _mm512_setzero_ps();
          }
        }
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
        for (int v = 0; v < V; ++v) store_tile_row(acc[r][v], c + r * n + 16 * v);
      }
    }
  };
};

template <typename Out>
constexpr auto bf16_tiles = grouped_gemm::tile_table<Bf16DotTiles<Out>::template Tile>();

// Every GEMM (all with n columns, a multiple of 16) on AMX tiles where it can,
// else on AVX512-BF16 tiles.
template <typename Out>
void run_gemms(const std::vector<Bf16Gemm<Out>>& gemms, int64_t n, bool amx) {
  if (amx && std::all_of(gemms.begin(), gemms.end(), [](const Bf16Gemm<Out>& g) {
        return g.k_step == 1 && g.k % kAmxPairs == 0;
      })) {
    return grouped_gemm::run_gemms_amx(gemms, n);
  }
  grouped_gemm::run_tiles(gemms, n, bf16_tiles<Out>);
}

const uint16_t* bits(const torch::Tensor& t) {
  return reinterpret_cast<const uint16_t*>(t.data_ptr<c10::BFloat16>());
}

// GCC 12 warns of the self-initialised "undefined" vectors inside the
// intrinsics' headers once inlined here (a false positive).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

using cpu::store_transposed;

// pack_row_pairs of m[i][j] = m[i + j * sj] (rows even, cols a multiple of 16,
// m 4-byte aligned): word (p, j) is the word at m + j * sj + 2p.
MOELAB_BF16_DOT_TARGET void pack_transposed_pairs(const uint16_t* m, int64_t rows, int64_t cols,
                                                  int64_t sj, Word* out, int64_t out_stride) {
  const int64_t pairs = rows / 2, full = pairs / 16 * 16;
  const auto* words = reinterpret_cast<const Word*>(m);
  const int64_t step = sj / 2;
  for (int64_t j0 = 0; j0 < cols; j0 += 16) {
    for (int64_t p0 = 0; p0 < full; p0 += 16) {
      __m512i r[16];
      for (int q = 0; q < 16; ++q) r[q] = _mm512_loadu_si512(words + (j0 + q) * step + p0);
      store_transposed(r, out + p0 * out_stride + j0, out_stride);
    }
    for (int64_t p = full; p < pairs; ++p) {
      for (int64_t j = j0; j < j0 + 16; ++j) out[p * out_stride + j] = words[j * step + p];
    }
  }
}

// Two fp32 values as one word of two bf16, rounded (to nearest even) by the
// instruction the vector packing uses.
MOELAB_BF16_DOT_TARGET Word bf16_pair(float lo, float hi) {
  const __m128i pair = (__m128i)_mm_cvtneps_pbh(_mm_set_ps(0.0f, 0.0f, hi, lo));
  return static_cast<Word>(_mm_cvtsi128_si32(pair));
}

// pack_transposed_pairs of fp32 m (rows even, cols a multiple of 16), rounded
// to bf16 as it is packed: word (p, j) from the floats at m + j * sj + 2p and
// the one after it.
MOELAB_BF16_DOT_TARGET void pack_transposed_pairs_f32(const float* m, int64_t rows, int64_t cols,
                                                      int64_t sj, Word* out, int64_t out_stride) {
  const int64_t pairs = rows / 2, full = pairs / 16 * 16;
  for (int64_t j0 = 0; j0 < cols; j0 += 16) {
    for (int64_t p0 = 0; p0 < full; p0 += 16) {
      __m512i r[16];
      for (int q = 0; q < 16; ++q) {
        const float* row = m + (j0 + q) * sj + 2 * p0;
        r[q] = (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(row + 16), _mm512_loadu_ps(row));
      }
      store_transposed(r, out + p0 * out_stride + j0, out_stride);
    }
    for (int64_t p = full; p < pairs; ++p) {
      for (int64_t j = j0; j < j0 + 16; ++j) {
        out[p * out_stride + j] = bf16_pair(m[j * sj + 2 * p], m[j * sj + 2 * p + 1]);
      }
    }
  }
}

// 16 fp32 values rounded to bf16, each in the low half of a 32-bit word.
MOELAB_BF16_DOT_TARGET __m512i widened_bf16(const float* v) {
  return _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(v)));
}

// pack_row_pairs of fp32 m with contiguous rows (cols a multiple of 16),
// rounded to bf16 as it is packed.
MOELAB_BF16_DOT_TARGET void pack_row_pairs_f32(const float* m, int64_t rows, int64_t cols,
                                               int64_t si, Word* out, int64_t out_stride) {
  for (int64_t p = 0; 2 * p < rows; ++p) {
    const float* lo = m + 2 * p * si;
    for (int64_t j = 0; j < cols; j += 16) {
      __m512i word = widened_bf16(lo + j);
      if (2 * p + 1 < rows)
        word = _mm512_or_si512(word, _mm512_slli_epi32(widened_bf16(lo + si + j), 16));
      _mm512_storeu_si512(out + p * out_stride + j, word);
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
      // The next block's 32 rows, a line of each per 32 columns: m (an output
      // gradient, larger than L2) comes from memory, read 32 rows at once,
      // which the hardware's prefetchers do not follow.
      if (j0 % 32 == 0) {
        for (int64_t i = 2 * p0 + 32; i < std::min(2 * p0 + 64, rows); ++i) {
          _mm_prefetch(reinterpret_cast<const char*>(m + i * si + j0), _MM_HINT_T0);
        }
      }
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

// Group g of one weight part w [E, K, N] (bf16, or fp32 rounded to bf16 as it
// is packed) as pairs of rows (pack_row_pairs), out_stride words apart. A
// transposed view of an [N, K] matrix (the experts' [E, out, in] stacks)
// already holds each pair side by side: transposed 16 x 16 at a time.
void pack_part(const torch::Tensor& w, int64_t g, Word* out, int64_t out_stride) {
  const int64_t k = w.size(1), n = w.size(2);
  if (w.scalar_type() == torch::kFloat) {
    const float* m = w.data_ptr<float>() + g * w.stride(0);
    if (w.stride(1) == 1 && k % 2 == 0) {
      return pack_transposed_pairs_f32(m, k, n, w.stride(2), out, out_stride);
    }
    if (w.stride(2) == 1) return pack_row_pairs_f32(m, k, n, w.stride(1), out, out_stride);
    return pack_part(w[g].to(torch::kBFloat16).unsqueeze(0), 0, out, out_stride);
  }
  const uint16_t* m = bits(w) + g * w.stride(0);
  const bool word_aligned = reinterpret_cast<std::uintptr_t>(m) % sizeof(Word) == 0;
  if (w.stride(1) == 1 && w.stride(2) % 2 == 0 && k % 2 == 0 && word_aligned) {
    return pack_transposed_pairs(m, k, n, w.stride(2), out, out_stride);
  }
  pack_row_pairs(m, k, n, w.stride(1), w.stride(2), out, out_stride);
}

// The weight parts of one GEMM side by side along `dim` (2: their columns, as
// the forward's gate | up; 1: their rows, as its backward's), their sizes
// there even: each group's [K / 2, N] words.
struct WeightParts {
  at::TensorList parts;
  int64_t dim;

  int64_t groups() const { return parts.front().size(0); }
  int64_t size(int64_t d) const {
    if (d != dim) return parts.front().size(d);
    int64_t total = 0;
    for (const auto& w : parts) total += w.size(d);
    return total;
  }
  void pack(int64_t g, Word* out) const {
    const int64_t n = size(2);
    int64_t offset = 0;
    for (const auto& w : parts) {
      pack_part(w, g, dim == 2 ? out + offset : out + offset / 2 * n, n);
      offset += w.size(dim);
    }
  }
};

// y[rows, N] = group g's rows of x[rows, K] times group g of the weight parts,
// into `y` where given (contiguous rows).
torch::Tensor forward_kernel(const torch::Tensor& x, const WeightParts& w,
                             const std::vector<int64_t>& counts, bool amx, torch::Tensor y = {}) {
  const int64_t groups = w.groups(), k = w.size(1), n = w.size(2), pairs = k / 2;
  auto packed = torch::empty({groups, pairs, n}, x.options().dtype(torch::kInt32));
  auto* packed_words = reinterpret_cast<Word*>(packed.data_ptr<int32_t>());
  at::parallel_for(0, groups, 1, [&](int64_t begin, int64_t end) {
    for (int64_t g = begin; g < end; ++g) w.pack(g, packed_words + g * pairs * n);
  });
  if (!y.defined()) y = torch::empty({x.size(0), n}, x.options());
  const auto starts = group_starts(counts);
  const auto* x_words = reinterpret_cast<const Word*>(bits(x));
  auto* y_bits = reinterpret_cast<uint16_t*>(y.data_ptr<c10::BFloat16>());
  std::vector<Bf16Gemm<uint16_t>> gemms;
  for (int64_t g = 0; g < groups; ++g) {
    gemms.push_back({x_words + starts[g] * pairs, pairs, 1, counts[g], pairs,
                     packed_words + g * pairs * n, y_bits + starts[g] * n});
  }
  run_gemms(gemms, n, amx);
  return y;
}

// x and dy packed for the weight gradients: each group's row pairs, from word
// row pair_starts[g]; AMX reduces over 16 pairs per tile, so there each group
// is padded with zero pairs to a multiple of 16 and dy_g^T packed row by row.
struct PackedRows {
  std::vector<int64_t> pair_starts;
  torch::Tensor x, dy;
};

PackedRows pack_rows(const torch::Tensor& x, const torch::Tensor& dy,
                     const std::vector<int64_t>& counts, bool amx) {
  const int64_t groups = static_cast<int64_t>(counts.size()), k = x.size(1), n = dy.size(1);
  const int64_t align = amx ? kAmxPairs : 1;
  PackedRows out;
  out.pair_starts.assign(groups + 1, 0);
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t pairs = (counts[g] + 1) / 2;
    out.pair_starts[g + 1] = out.pair_starts[g] + (pairs + align - 1) / align * align;
  }
  const auto starts = group_starts(counts);
  const auto words = x.options().dtype(torch::kInt32);
  out.x = torch::empty({out.pair_starts.back(), k}, words);
  out.dy = torch::empty({out.pair_starts.back(), n}, words);
  auto* xw = reinterpret_cast<Word*>(out.x.data_ptr<int32_t>());
  auto* dyw = reinterpret_cast<Word*>(out.dy.data_ptr<int32_t>());
  const auto& pair_starts = out.pair_starts;
  at::parallel_for(0, groups, 1, [&](int64_t begin, int64_t end) {
    for (int64_t g = begin; g < end; ++g) {
      const int64_t pairs = pair_starts[g + 1] - pair_starts[g], used = (counts[g] + 1) / 2;
      Word* x_g = xw + pair_starts[g] * k;
      pack_row_pairs(bits(x) + starts[g] * k, counts[g], k, k, 1, x_g, k);
      std::fill(x_g + used * k, x_g + pairs * k, Word{0});
      if (amx) {
        pack_column_pairs(bits(dy) + starts[g] * n, counts[g], n, n, pairs,
                          dyw + pair_starts[g] * n);
      } else {
        pack_row_pairs(bits(dy) + starts[g] * n, counts[g], n, n, 1, dyw + pair_starts[g] * n, n);
      }
    }
  });
  return out;
}

// A weight part's gradient for `groups` groups as the kernel writes it, transposed:
// [groups, N_i, K] in the part's dtype, uninitialised.
torch::Tensor transposed_weight_grad(const torch::Tensor& w, int64_t groups) {
  return torch::empty({groups, w.size(2), w.size(1)}, w.options());
}

// The gradient of each weight part (all of one dtype Out: bf16 bits or fp32):
// dw[g] = x_g^T dy_g over the part's columns of dy, reducing over each group's
// rows. Computed as its transpose dy_g^T x_g, contiguous [E, N_i, K]: the
// weights are transposed views of [E, out, in] stacks, so their gradients then
// reach the stacks without a copy. Into grads_t where given, else into new
// tensors, allocated once x and dy are packed (allocated before the backward's
// dx GEMM, the coarse layers' backward measured slower); returned.
template <typename Out>
std::vector<torch::Tensor> weight_grad_kernel(const torch::Tensor& x, const torch::Tensor& dy,
                                              const std::vector<int64_t>& counts, bool amx,
                                              at::TensorList parts,
                                              std::vector<torch::Tensor> grads_t) {
  const int64_t groups = static_cast<int64_t>(counts.size()), k = x.size(1), n = dy.size(1);
  const PackedRows packed = pack_rows(x, dy, counts, amx);
  for (size_t i = grads_t.size(); i < parts.size(); ++i) {
    grads_t.push_back(transposed_weight_grad(parts[i], groups));
  }
  const auto* xw = reinterpret_cast<const Word*>(packed.x.data_ptr<int32_t>());
  const auto* dyw = reinterpret_cast<const Word*>(packed.dy.data_ptr<int32_t>());
  std::vector<Bf16Gemm<Out>> gemms;
  int64_t column = 0;  // of dy: the part's first
  for (const auto& grad_t : grads_t) {
    const int64_t width = grad_t.size(1);
    auto* c = reinterpret_cast<Out*>(grad_t.data_ptr());
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t pairs = packed.pair_starts[g + 1] - packed.pair_starts[g];
      // A = dy_g^T: row i of A is column i of dy_g; its pair p is the packed
      // word (i, p) on AMX, (p, i) otherwise.
      const int64_t row_step = amx ? pairs : 1, pair_step = amx ? 1 : n;
      gemms.push_back({dyw + packed.pair_starts[g] * n + column * row_step, row_step, pair_step,
                       width, pairs, xw + packed.pair_starts[g] * k, c + g * width * k});
    }
    column += width;
  }
  run_gemms(gemms, k, amx);
  return grads_t;
}

// Consecutive groups [group, group + groups), rows [row, row + rows) of x.
struct GroupChunk {
  int64_t group, groups, row, rows;
};

// With many more groups than threads (fine-grained experts), the backward
// takes the groups a chunk at a time, each chunk whole on one thread (its dx,
// packing and weight gradients in turn, the chunks shared out as threads free
// up), so that its rows of x and dy, read by all three, stay in that core's
// L2 from one to the next, where passes over every group go back to memory
// between them (a fine-grained layer's dy is tens of MB). A chunk's rows of x
// and dy fill kChunkBytes at least, which pays for its passes' own set-up.
// With few chunks, each pass runs over all groups in parallel.
constexpr int64_t kChunkBytes = int64_t{1} << 19;
constexpr int64_t kChunksPerThreadToSplit = 4;

std::vector<GroupChunk> backward_chunks(const std::vector<int64_t>& counts, int64_t row_bytes) {
  std::vector<GroupChunk> chunks;
  GroupChunk c{0, 0, 0, 0};
  for (int64_t g = 0; g < static_cast<int64_t>(counts.size()); ++g) {
    c.groups += 1;
    c.rows += counts[g];
    if (c.rows * row_bytes >= kChunkBytes) {
      chunks.push_back(c);
      c = {g + 1, 0, c.row + c.rows, 0};
    }
  }
  if (c.groups > 0) chunks.push_back(c);
  return chunks;
}

// x [rows, K] (bf16) times the weight parts side by side along their columns,
// bf16 or fp32 (each group rounded to bf16 as it is packed; the gradients come
// back in the parts' dtype, so fp32 master weights need no cast either way).
class GroupedMatmulFunction : public torch::autograd::Function<GroupedMatmulFunction> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x,
                               const at::TensorList& parts, const std::vector<int64_t>& counts,
                               bool amx) {
    std::vector<torch::Tensor> saved{x};
    saved.insert(saved.end(), parts.begin(), parts.end());
    ctx->save_for_backward(saved);
    ctx->saved_data["counts"] = counts;
    ctx->saved_data["amx"] = amx;
    return forward_kernel(x, {parts, 2}, counts, amx);
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto& x = saved[0];
    const std::vector<torch::Tensor> parts(saved.begin() + 1, saved.end());
    const auto counts = ctx->saved_data["counts"].toIntVector();
    const bool amx = ctx->saved_data["amx"].toBool();
    const auto dy = grads[0].contiguous();
    const bool want_dx = ctx->needs_input_grad(0);
    bool want_weights = false;  // frozen weights: no packing, no GEMMs
    for (size_t i = 0; i < parts.size(); ++i) want_weights |= ctx->needs_input_grad(i + 1);
    const auto chunks = backward_chunks(counts, 2 * (x.size(1) + dy.size(1)));
    const auto n_chunks = static_cast<int64_t>(chunks.size());
    ChunkGrads grads_out;
    if (n_chunks < kChunksPerThreadToSplit * at::get_num_threads()) {
      const GroupChunk all{0, static_cast<int64_t>(counts.size()), 0, x.size(0)};
      grads_out = backward_chunk(all, x, dy, parts, counts, amx, want_dx, want_weights, {});
    } else {
      grads_out = ChunkGrads::allocate(x, parts, want_dx, want_weights);
      std::atomic<int64_t> next{0};
      // Nested in this parallel loop, the passes' own run inline on its thread.
      at::parallel_for(0, at::get_num_threads(), 1, [&](int64_t, int64_t) {
        // A pool thread has grad mode on (the backward's is off): the views of
        // saved tensors taken here need no autograd history.
        const torch::NoGradGuard no_grad;
        for (int64_t i = next++; i < n_chunks; i = next++) {
          backward_chunk(chunks[i], x, dy, parts, counts, amx, want_dx, want_weights,
                         grads_out.of(chunks[i]));
        }
      });
    }
    tensor_list out(parts.size() + 3);
    out[0] = grads_out.dx;
    for (size_t i = 0; i < grads_out.weights_t.size(); ++i) {
      if (ctx->needs_input_grad(i + 1)) out[i + 1] = grads_out.weights_t[i].transpose(1, 2);
    }
    return out;
  }

 private:
  // Gradients of rows of x (dx) and of groups of the weight parts, each
  // [groups, N_i, K] (weights_t): undefined or empty where not yet allocated.
  struct ChunkGrads {
    torch::Tensor dx;
    std::vector<torch::Tensor> weights_t;

    // Every row's and group's gradients, uninitialised (weights_t in the parts' dtypes).
    static ChunkGrads allocate(const torch::Tensor& x, const std::vector<torch::Tensor>& parts,
                               bool want_dx, bool want_weights) {
      ChunkGrads grads{want_dx ? torch::empty_like(x) : torch::Tensor(), {}};
      for (const auto& w : parts) {
        if (want_weights) {
          grads.weights_t.push_back(transposed_weight_grad(w, w.size(0)));
        }
      }
      return grads;
    }

    // Chunk c's rows and groups of these (allocated) gradients.
    ChunkGrads of(const GroupChunk& c) const {
      ChunkGrads views{dx.defined() ? dx.narrow(0, c.row, c.rows) : torch::Tensor(), {}};
      for (const auto& w : weights_t) views.weights_t.push_back(w.narrow(0, c.group, c.groups));
      return views;
    }
  };

  // Chunk c's dx (where wanted) and its groups' weight gradients (where
  // wanted), into `into` where it holds them, else into new tensors; returned.
  static ChunkGrads backward_chunk(const GroupChunk& c, const torch::Tensor& x,
                                   const torch::Tensor& dy, const std::vector<torch::Tensor>& parts,
                                   const std::vector<int64_t>& counts, bool amx, bool want_dx,
                                   bool want_weights, ChunkGrads into) {
    const auto rows = [&](const torch::Tensor& t) { return t.narrow(0, c.row, c.rows); };
    std::vector<torch::Tensor> chunk_parts;
    for (const auto& w : parts) chunk_parts.push_back(w.narrow(0, c.group, c.groups));
    const std::vector<int64_t> chunk_counts(counts.begin() + c.group,
                                            counts.begin() + c.group + c.groups);
    if (want_dx) {
      std::vector<torch::Tensor> transposed;
      for (const auto& w : chunk_parts) transposed.push_back(w.transpose(1, 2));
      into.dx = forward_kernel(rows(dy), {transposed, 1}, chunk_counts, amx, into.dx);
    }
    if (!want_weights) return into;
    into.weights_t = parts.front().scalar_type() == torch::kFloat
                         ? weight_grad_kernel<float>(rows(x), rows(dy), chunk_counts, amx,
                                                     chunk_parts, into.weights_t)
                         : weight_grad_kernel<uint16_t>(rows(x), rows(dy), chunk_counts, amx,
                                                        chunk_parts, into.weights_t);
    return into;
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

namespace {

// Whether the bf16 CPU kernel takes x with these parts: all bf16, or all fp32
// (rounded to bf16 as they are packed), each fitting the tiles.
bool bf16_kernel_takes(const torch::Tensor& x, at::TensorList parts) {
  const auto dtype = parts.front().scalar_type();
  if (x.scalar_type() != torch::kBFloat16 || !x.is_cpu() ||
      (dtype != torch::kBFloat16 && dtype != torch::kFloat)) {
    return false;
  }
  return std::all_of(parts.begin(), parts.end(), [&](const torch::Tensor& w) {
    return w.scalar_type() == dtype && w.is_cpu() &&
           grouped_matmul_cpu_kernel_fits(torch::kBFloat16, w.size(1), w.size(2));
  });
}

}  // namespace

torch::Tensor grouped_matmul(const torch::Tensor& x, at::TensorList w_parts,
                             const std::vector<int64_t>& counts, CpuTiles tiles) {
  TORCH_CHECK(!w_parts.empty() && x.dim() == 2, "grouped_matmul: x [rows, K] and weights expected");
  for (const auto& w : w_parts) {
    TORCH_CHECK(
        w.dim() == 3 && x.size(1) == w.size(1) && static_cast<int64_t>(counts.size()) == w.size(0),
        "grouped_matmul: x [rows, K], w [groups, K, N] and one count per group expected, "
        "got x ",
        x.sizes(), ", w ", w.sizes(), " and ", counts.size(), " counts");
  }
  TORCH_CHECK(std::all_of(counts.begin(), counts.end(), [](int64_t c) { return c >= 0; }) &&
                  std::accumulate(counts.begin(), counts.end(), int64_t{0}) == x.size(0),
              "grouped_matmul: the group counts must be >= 0 and sum to x's ", x.size(0), " rows");
#ifdef MOELAB_BF16_DOT_KERNEL
  if (bf16_kernel_takes(x, w_parts)) {
    const bool amx = tiles == CpuTiles::kBest && grouped_matmul_has_amx();
    return GroupedMatmulFunction::apply(x.contiguous(), w_parts, counts, amx);
  }
#endif
  if (grouped_matmul_f32_takes(x, w_parts)) return grouped_matmul_f32(x, w_parts, counts);
  return grouped_mm_fallback(x, join_weight_parts(w_parts, x.scalar_type()), counts);
}

torch::Tensor join_weight_parts(at::TensorList w_parts, torch::ScalarType dtype) {
  if (w_parts.size() == 1) return w_parts.front().to(dtype);
  // Each part cast straight into its columns (one pass over each, as the cast
  // alone would take) of an [E, N, K] tensor, returned transposed: the layout
  // of the experts' [E, out, in] stacks, which cuBLAS takes as it is.
  const auto& first = w_parts.front();
  int64_t n = 0;
  for (const auto& w : w_parts) n += w.size(2);
  auto joined = torch::empty({first.size(0), n, first.size(1)}, first.options().dtype(dtype));
  int64_t column = 0;
  for (const auto& w : w_parts) {
    joined.narrow(1, column, w.size(2)).copy_(w.transpose(1, 2));
    column += w.size(2);
  }
  return joined.transpose(1, 2);
}

torch::Tensor grouped_matmul(const torch::Tensor& x, const torch::Tensor& w,
                             const std::vector<int64_t>& counts, CpuTiles tiles) {
  return grouped_matmul(x, at::TensorList(w), counts, tiles);
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
