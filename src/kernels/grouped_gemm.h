// The GEMMs behind grouped_matmul's bf16 CPU kernels, as the two micro-kernels
// see them (and the blocking the fp32 kernel shares): bf16 operands with pairs of consecutive
// reduction elements in one 32-bit word (the operand of one AVX512-BF16 dot product, and the row
// layout AMX tiles take), every group's GEMM run in one parallel loop.
#pragma once

#include <cstddef>
#include <cstdint>
#include <numeric>
#include <vector>

#if defined(__x86_64__) && defined(__GNUC__)
#define MOELAB_BF16_DOT_KERNEL 1
#endif

namespace moelab::grouped_gemm {

// Two bf16 values, the first in the low half.
using Word = uint32_t;

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

// One parallel task: rows [row, row + R) x columns [col, col + C) of gemm's c.
struct Block {
  std::size_t gemm;
  int64_t row, col;
};

// Every GEMM's c (n columns) cut into blocks of R x C, for one parallel loop
// over all of them: the small GEMMs of many experts fill the threads together.
// Any GEMM type with `rows` (the fp32 kernel's too).
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

// Every GEMM (all with n columns, a multiple of 16; pair_step 1; pairs a
// multiple of kAmxPairs) on AMX tiles, in one parallel loop.
void run_gemms_amx(const std::vector<Gemm>& gemms, int64_t n);

}  // namespace moelab::grouped_gemm
