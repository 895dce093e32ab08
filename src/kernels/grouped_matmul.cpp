#include "kernels/grouped_matmul.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <numeric>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define MOELAB_BF16_DOT_KERNEL 1
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

// Group g's rows start at starts[g]; starts[E] is the row count.
std::vector<int64_t> group_starts(const std::vector<int64_t>& counts) {
  std::vector<int64_t> starts(counts.size() + 1, 0);
  std::partial_sum(counts.begin(), counts.end(), starts.begin() + 1);
  return starts;
}

// Two bf16 values in one 32-bit word, the first in the low half: consecutive
// elements along the reduction, the operand pair of one AVX512-BF16 dot product.
using Word = uint32_t;

// Matrix m[i][j] = m[i * si + j * sj] of `rows` x `cols` as [ceil(rows / 2), cols]
// words: word (p, j) holds m[2p][j] and m[2p + 1][j] (zero past the last row).
void pack_row_pairs(const uint16_t* m, int64_t rows, int64_t cols, int64_t si, int64_t sj,
                    Word* out) {
  for (int64_t p = 0; 2 * p < rows; ++p) {
    const uint16_t* lo = m + 2 * p * si;
    Word* o = out + p * cols;
    if (2 * p + 1 < rows) {
      const uint16_t* hi = lo + si;
      for (int64_t j = 0; j < cols; ++j) o[j] = lo[j * sj] | Word{hi[j * sj]} << 16;
    } else {
      for (int64_t j = 0; j < cols; ++j) o[j] = lo[j * sj];
    }
  }
}

// One GEMM of a group: c[rows, n] = A · B, reducing over `pairs` element pairs.
// A's pair p of row i is the word a[i * row_step + p * pair_step], so that A can
// be a row-major matrix (row_step = K / 2, pair_step = 1) or a packed transpose
// (row_step = 1, pair_step = its row count); B is [pairs, n] words (pack_row_pairs).
struct Gemm {
  const Word* a;
  int64_t row_step, pair_step, rows, pairs;
  const Word* b;
  uint16_t* c;  // bf16, row stride n
};

constexpr int kTileRows = 6;                   // 6 x 4 accumulators + 4 B vectors + 1 A
constexpr int kTileVectors = 4;                // 16 fp32 each: 64 columns per tile
constexpr int64_t kBlockRows = 8 * kTileRows;  // rows per parallel task
constexpr int64_t kBlockCols = 16 * kTileVectors;

// An R x 16V tile of c, accumulated in fp32 registers over every pair, then
// rounded to bf16 (round to nearest even) once.
template <int R, int V>
MOELAB_BF16_DOT_TARGET void tile(const Word* a, int64_t row_step, int64_t pair_step, const Word* b,
                                 int64_t n, int64_t pairs, uint16_t* c) {
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

using TileFn = void (*)(const Word*, int64_t, int64_t, const Word*, int64_t, int64_t, uint16_t*);

template <int R>
constexpr std::array<TileFn, kTileVectors> tiles_of_rows() {
  return {&tile<R, 1>, &tile<R, 2>, &tile<R, 3>, &tile<R, 4>};
}

// tiles[R - 1][V - 1]: the R-row, 16V-column tile.
const std::array<std::array<TileFn, kTileVectors>, kTileRows> tiles = {
    tiles_of_rows<1>(), tiles_of_rows<2>(), tiles_of_rows<3>(),
    tiles_of_rows<4>(), tiles_of_rows<5>(), tiles_of_rows<6>()};

// Every GEMM (all with n columns, a multiple of 16) in one parallel loop over
// blocks of rows and columns: the small GEMMs of many experts fill the threads
// together, and a block's B panel stays in cache across its row tiles.
void run_gemms(const std::vector<Gemm>& gemms, int64_t n) {
  struct Block {
    size_t gemm;
    int64_t row, col;
  };
  std::vector<Block> blocks;
  for (size_t g = 0; g < gemms.size(); ++g) {
    for (int64_t row = 0; row < gemms[g].rows; row += kBlockRows) {
      for (int64_t col = 0; col < n; col += kBlockCols) blocks.push_back({g, row, col});
    }
  }
  at::parallel_for(0, static_cast<int64_t>(blocks.size()), 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const Block& blk = blocks[i];
      const Gemm& g = gemms[blk.gemm];
      const int64_t row_end = std::min(blk.row + kBlockRows, g.rows);
      const int64_t vectors = std::min(kBlockCols, n - blk.col) / 16;
      for (int64_t r = blk.row; r < row_end; r += kTileRows) {
        const int64_t rows = std::min<int64_t>(kTileRows, row_end - r);
        tiles[rows - 1][vectors - 1](g.a + r * g.row_step, g.row_step, g.pair_step, g.b + blk.col,
                                     n, g.pairs, g.c + r * n + blk.col);
      }
    }
  });
}

const uint16_t* bits(const torch::Tensor& t) {
  return reinterpret_cast<const uint16_t*>(t.data_ptr<c10::BFloat16>());
}

// y[rows, N] = group g's rows of x[rows, K] times w[g] ([E, K, N], any strides).
torch::Tensor forward_kernel(const torch::Tensor& x, const torch::Tensor& w,
                             const std::vector<int64_t>& counts) {
  const int64_t groups = w.size(0), k = w.size(1), n = w.size(2), pairs = k / 2;
  auto packed = torch::empty({groups, pairs, n}, x.options().dtype(torch::kInt32));
  auto* packed_words = reinterpret_cast<Word*>(packed.data_ptr<int32_t>());
  at::parallel_for(0, groups, 1, [&](int64_t begin, int64_t end) {
    for (int64_t g = begin; g < end; ++g) {
      pack_row_pairs(bits(w) + g * w.stride(0), k, n, w.stride(1), w.stride(2),
                     packed_words + g * pairs * n);
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
  run_gemms(gemms, n);
  return y;
}

// dw[g] = x_g^T dy_g: [E, K, N], reducing over each group's rows. Computed as
// its transpose dy_g^T x_g, contiguous [E, N, K]: the weights are transposed
// views of [E, out, in] stacks, so their gradient then reaches the stack
// without a copy.
torch::Tensor weight_grad_kernel(const torch::Tensor& x, const torch::Tensor& dy,
                                 const std::vector<int64_t>& counts) {
  const int64_t groups = static_cast<int64_t>(counts.size()), k = x.size(1), n = dy.size(1);
  // Group g's row pairs start at word row pair_starts[g] of the packed operands.
  std::vector<int64_t> pair_starts(groups + 1, 0);
  for (int64_t g = 0; g < groups; ++g) pair_starts[g + 1] = pair_starts[g] + (counts[g] + 1) / 2;
  const auto starts = group_starts(counts);
  const auto words = x.options().dtype(torch::kInt32);
  auto x_packed = torch::empty({pair_starts.back(), k}, words);
  auto dy_packed = torch::empty({pair_starts.back(), n}, words);
  auto* xw = reinterpret_cast<Word*>(x_packed.data_ptr<int32_t>());
  auto* dyw = reinterpret_cast<Word*>(dy_packed.data_ptr<int32_t>());
  at::parallel_for(0, groups, 1, [&](int64_t begin, int64_t end) {
    for (int64_t g = begin; g < end; ++g) {
      pack_row_pairs(bits(x) + starts[g] * k, counts[g], k, k, 1, xw + pair_starts[g] * k);
      pack_row_pairs(bits(dy) + starts[g] * n, counts[g], n, n, 1, dyw + pair_starts[g] * n);
    }
  });
  auto dw_t = torch::empty({groups, n, k}, dy.options());
  auto* dw_bits = reinterpret_cast<uint16_t*>(dw_t.data_ptr<c10::BFloat16>());
  std::vector<Gemm> gemms;
  for (int64_t g = 0; g < groups; ++g) {
    // A = dy_g^T: row i of A is column i of dy_g, its pair p the packed word (p, i).
    gemms.push_back({dyw + pair_starts[g] * n, 1, n, n, pair_starts[g + 1] - pair_starts[g],
                     xw + pair_starts[g] * k, dw_bits + g * n * k});
  }
  run_gemms(gemms, k);
  return dw_t.transpose(1, 2);
}

class GroupedMatmulFunction : public torch::autograd::Function<GroupedMatmulFunction> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& w,
                               const std::vector<int64_t>& counts) {
    ctx->save_for_backward({x, w});
    ctx->saved_data["counts"] = counts;
    return forward_kernel(x, w, counts);
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto& x = saved[0];
    const auto& w = saved[1];
    const auto counts = ctx->saved_data["counts"].toIntVector();
    const auto dy = grads[0].contiguous();
    torch::Tensor dx, dw;
    if (ctx->needs_input_grad(0)) dx = forward_kernel(dy, w.transpose(1, 2), counts);
    if (ctx->needs_input_grad(1)) dw = weight_grad_kernel(x, dy, counts);
    return {dx, dw, torch::Tensor()};
  }
};

#endif  // MOELAB_BF16_DOT_KERNEL

}  // namespace

bool grouped_matmul_has_cpu_kernel() {
#ifdef MOELAB_BF16_DOT_KERNEL
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512bf16");
  return has;
#else
  return false;
#endif
}

torch::Tensor grouped_matmul(const torch::Tensor& x, const torch::Tensor& w,
                             const std::vector<int64_t>& counts) {
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
  // The backward's dx has K columns, so K must suit the tiles as N does.
  if (bf16 && x.is_cpu() && w.size(1) % 16 == 0 && w.size(2) % 16 == 0 &&
      grouped_matmul_has_cpu_kernel()) {
    return GroupedMatmulFunction::apply(x.contiguous(), w, counts);
  }
#endif
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
