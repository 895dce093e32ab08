// The GEMMs behind grouped_matmul's bf16 CPU kernels, as the two micro-kernels
// see them (and the blocking the fp32 kernel shares): bf16 operands with pairs of consecutive
// reduction elements in one 32-bit word (the operand of one AVX512-BF16 dot product, and the row
// layout AMX tiles take), every group's GEMM run in one parallel loop.
#pragma once

#include <ATen/Parallel.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <type_traits>
#include <vector>

#if defined(__x86_64__) && defined(__GNUC__)
#define MOELAB_BF16_DOT_KERNEL 1
#endif

namespace moelab::grouped_gemm {

// Two bf16 values, the first in the low half.
using Word = uint32_t;

// One GEMM of a group: c[rows, n] = A · B over `k` reduction steps of `In`
// (bf16: a word holding a pair of elements; fp32: one element). A's step p of
// row i is a[i * row_step + p * k_step], so that A can be a row-major matrix
// (k_step = 1) or a transposed or packed one (row_step = 1, k_step = its row
// count); B is [k, n] (bf16: words, pack_row_pairs).
template <typename In, typename Out>
struct TiledGemm {
  const In* a;
  int64_t row_step, k_step, rows, k;
  const In* b;
  Out* c;  // row stride n
};
// bf16 operands, c in bf16 (uint16_t bits) or fp32.
template <typename Out>
using Bf16Gemm = TiledGemm<Word, Out>;

// One parallel task: rows [row, row + R) x columns [col, col + C) of gemm's c.
struct Block {
  std::size_t gemm;
  int64_t row, col;
};

// Every GEMM's c (n columns) cut into blocks of R x C, for one parallel loop
// over all of them: the small GEMMs of many experts fill the threads together.
template <typename AnyGemm>
std::vector<Block> blocks_of(const std::vector<AnyGemm>& gemms, int64_t n, int64_t rows,
                             int64_t cols) {
  std::vector<Block> blocks;
  for (std::size_t g = 0; g < gemms.size(); ++g) {
    for (int64_t row = 0; row < gemms[g].rows; row += rows) {
      for (int64_t col = 0; col < n; col += cols) blocks.push_back({g, row, col});
    }
  }
  return blocks;
}

// The AVX-512 kernels' register tiles, R x 16V of c accumulated over all of k:
// 6 x 4 accumulators + 4 B vectors + 1 A broadcast fill the 32 registers.
constexpr int kTileRows = 6;
constexpr int kTileVectors = 4;                // 16 fp32 each: 64 columns per tile
constexpr int64_t kBlockRows = 8 * kTileRows;  // rows per parallel task
constexpr int64_t kBlockCols = 16 * kTileVectors;

// A tile: c = A · B over k steps, from zero or carrying on from the sums in c
// (accumulate); B's rows and c's are n apart.
template <typename In, typename Out>
using TileFn = void (*)(const In* a, int64_t row_step, int64_t k_step, const In* b, int64_t k,
                        Out* c, int64_t n, bool accumulate);

// tiles[R - 1][V - 1] = Tile<R, V>::run, the R-row, 16V-column tile.
template <template <int, int> class Tile, int R>
constexpr auto tile_row() {
  return std::array{&Tile<R, 1>::run, &Tile<R, 2>::run, &Tile<R, 3>::run, &Tile<R, 4>::run};
}
template <template <int, int> class Tile>
constexpr auto tile_table() {
  return std::array{tile_row<Tile, 1>(), tile_row<Tile, 2>(), tile_row<Tile, 3>(),
                    tile_row<Tile, 4>(), tile_row<Tile, 5>(), tile_row<Tile, 6>()};
}

// Reduction steps per pass over a block, when c is fp32: the pass's B rows
// (128 of 64 columns, 32 KB) then stay in L1 across the block's row tiles,
// where a whole long reduction (a weight gradient's, over an expert's rows)
// would stream them from L2 once per tile. The next pass carries on from the
// fp32 sums in c, so each element is still one FMA chain in order; a bf16 c
// would round them, so it takes the whole reduction in one pass.
constexpr int64_t kReductionPass = 128;

// Where each of `parts` runs of blocks starts, and (last) where the blocks end:
// runs of about equal work, each block in the run where its work starts
// (work_before[i]: the work of the blocks before block i; its last entry, the
// total).
inline std::vector<std::size_t> balanced_runs(const std::vector<int64_t>& work_before,
                                              int64_t parts) {
  const int64_t total = work_before.back();
  std::vector<std::size_t> starts;
  for (int64_t p = 0; p < parts; ++p) {
    const auto at = std::lower_bound(work_before.begin(), work_before.end() - 1, total * p / parts);
    starts.push_back(static_cast<std::size_t>(at - work_before.begin()));
  }
  starts.push_back(work_before.size() - 1);
  return starts;
}

// Every GEMM's blocks (blocks_of) in one parallel loop, each thread a run of
// about equal work (a block's rows x columns x reduction steps), handed to
// run(first, last). Equal counts of blocks would not do: a weight gradient
// reduces over its expert's rows, and routing gives some experts several times
// the rows of others.
template <typename AnyGemm, typename Run>
void parallel_over_blocks(const std::vector<AnyGemm>& gemms, int64_t n, int64_t rows, int64_t cols,
                          const Run& run) {
  const auto blocks = blocks_of(gemms, n, rows, cols);
  if (blocks.empty()) return;
  std::vector<int64_t> work_before(blocks.size() + 1, 0);
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    const Block& blk = blocks[i];
    const auto& g = gemms[blk.gemm];
    work_before[i + 1] = work_before[i] + std::min(rows, g.rows - blk.row) *
                                              std::min(cols, n - blk.col) *
                                              std::max<int64_t>(g.k, 1);
  }
  const auto starts = balanced_runs(
      work_before, std::min<int64_t>(at::get_num_threads(), static_cast<int64_t>(blocks.size())));
  at::parallel_for(0, static_cast<int64_t>(starts.size()) - 1, 1, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      run(blocks.data() + starts[r], blocks.data() + starts[r + 1]);
    }
  });
}

// Every GEMM (all with n columns, a multiple of 16) in one parallel loop over
// blocks; a block's B panel stays in cache across its row tiles.
template <typename In, typename Out, typename Table>
void run_tiles(const std::vector<TiledGemm<In, Out>>& gemms, int64_t n, const Table& tiles) {
  parallel_over_blocks(
      gemms, n, kBlockRows, kBlockCols, [&](const Block* first, const Block* last) {
        for (const Block* blk = first; blk != last; ++blk) {
          const TiledGemm<In, Out>& g = gemms[blk->gemm];
          const int64_t row_end = std::min(blk->row + kBlockRows, g.rows);
          const int64_t vectors = std::min(kBlockCols, n - blk->col) / 16;
          const int64_t pass =
              std::is_same_v<Out, float> ? kReductionPass : std::max<int64_t>(g.k, 1);
          // One pass at least: a GEMM over no reduction (a group without rows) writes zeros.
          for (int64_t p = 0; p == 0 || p < g.k; p += pass) {
            const int64_t steps = std::min(pass, g.k - p);
            for (int64_t r = blk->row; r < row_end; r += kTileRows) {
              const int64_t rows = std::min<int64_t>(kTileRows, row_end - r);
              tiles[rows - 1][vectors - 1](g.a + r * g.row_step + p * g.k_step, g.row_step,
                                           g.k_step, g.b + p * n + blk->col, steps,
                                           g.c + r * n + blk->col, n, p > 0);
            }
          }
        }
      });
}

// Group g's rows start at starts[g]; starts[E] is the row count.
inline std::vector<int64_t> group_starts(const std::vector<int64_t>& counts) {
  std::vector<int64_t> starts(counts.size() + 1, 0);
  std::partial_sum(counts.begin(), counts.end(), starts.begin() + 1);
  return starts;
}

// AMX tiles reduce over 16 pairs at a time and load A row by row.
constexpr int64_t kAmxPairs = 16;

// Whether this CPU has AMX-BF16 and the kernel granted this process its tile
// state (Linux hands it out on request only). Asked once.
bool amx_usable();

// Every GEMM (all with n columns, a multiple of 16; k_step 1; k a multiple of
// kAmxPairs) on AMX tiles, in one parallel loop. Out: uint16_t (bf16) or float.
template <typename Out>
void run_gemms_amx(const std::vector<Bf16Gemm<Out>>& gemms, int64_t n);

}  // namespace moelab::grouped_gemm
