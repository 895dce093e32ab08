// grouped_matmul's GEMMs on AMX tiles (Intel Sapphire Rapids and later): one
// tile instruction multiplies 16 x 32 by 32 x 16 bf16 into 16 x 16 fp32, where
// oneDNN's batched GEMMs reached a quarter of that peak on the small GEMMs of
// fine-grained experts.
#include "kernels/grouped_gemm.h"

#ifdef MOELAB_BF16_DOT_KERNEL

#include <ATen/Parallel.h>
#include <ATen/cpu/Utils.h>
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "util/cpu_features.h"

#define MOELAB_AMX_TARGET __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512bf16")))

// Tile instructions as our own asm, loads and stores with a memory clobber:
// GCC's intrinsics name no memory operand, so the compiler could move the
// stores that fill a buffer past the tile load that reads it.
#define MOELAB_TILE_LOAD(t, base, stride) \
  asm volatile("tileloadd (%0,%1,1), %%tmm" #t ::"r"(base), "r"(int64_t{stride}) : "memory")
#define MOELAB_TILE_STORE(t, base, stride) \
  asm volatile("tilestored %%tmm" #t ", (%0,%1,1)" ::"r"(base), "r"(int64_t{stride}) : "memory")
#define MOELAB_TILE_DOT(c, a, b) asm volatile("tdpbf16ps %%tmm" #b ", %%tmm" #a ", %%tmm" #c ::)
#define MOELAB_TILE_ZERO(t) asm volatile("tilezero %%tmm" #t ::)

namespace moelab::grouped_gemm {
namespace {

struct alignas(64) TileConfig {
  uint8_t palette, start_row, reserved[14];
  uint16_t bytes_per_row[16];
  uint8_t rows[16];
};

// Tiles 0-3 accumulate a 2 x 2 block of 16 x 16 fp32; 4-5 hold 16 rows of A,
// 6-7 16 columns of B, each over 16 pairs: every tile is 16 rows of 64 bytes.
MOELAB_AMX_TARGET void configure_tiles() {
  TileConfig config{};
  config.palette = 1;
  for (int t = 0; t < 8; ++t) {
    config.bytes_per_row[t] = 64;
    config.rows[t] = 16;
  }
  asm volatile("ldtilecfg %0" ::"m"(config));
}

MOELAB_AMX_TARGET void release_tiles() {
  asm volatile("tilerelease" ::);
}

constexpr int64_t kTile = 16;
constexpr int64_t kBlock = 64;  // rows and columns of c per parallel task

// 16 accumulated fp32 values to c: rounded to bf16 (to nearest even) once, as
// the AVX512-BF16 kernel does, or as they are.
MOELAB_AMX_TARGET void store_row(const float* acc, uint16_t* c) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(c),
                      (__m256i)_mm512_cvtneps_pbh(_mm512_load_ps(acc)));
}
MOELAB_AMX_TARGET void store_row(const float* acc, float* c) {
  _mm512_storeu_ps(c, _mm512_load_ps(acc));
}
// Two tiles' rows side by side: 32 columns of c.
MOELAB_AMX_TARGET void store_rows(const float* left, const float* right, uint16_t* c) {
  _mm512_storeu_si512(c, (__m512i)_mm512_cvtne2ps_pbh(_mm512_load_ps(right), _mm512_load_ps(left)));
}
MOELAB_AMX_TARGET void store_rows(const float* left, const float* right, float* c) {
  store_row(left, c);
  store_row(right, c + kTile);
}

// Rows [0, 16RT) x columns [0, 16CT) of c = A · B, of which the first `rows`
// rows are stored. A: 16RT rows of `pairs` words, a_step words apart; B: [pairs, n].
template <typename Out, int RT, int CT>
MOELAB_AMX_TARGET void tile_product(const Word* a, int64_t a_step, const Word* b, int64_t n,
                                    int64_t pairs, Out* c, int64_t rows) {
  MOELAB_TILE_ZERO(0);
  if constexpr (CT == 2) MOELAB_TILE_ZERO(1);
  if constexpr (RT == 2) MOELAB_TILE_ZERO(2);
  if constexpr (RT == 2 && CT == 2) MOELAB_TILE_ZERO(3);
  for (int64_t p = 0; p < pairs; p += kAmxPairs) {
    MOELAB_TILE_LOAD(4, a + p, 4 * a_step);
    MOELAB_TILE_LOAD(6, b + p * n, 4 * n);
    MOELAB_TILE_DOT(0, 4, 6);
    if constexpr (CT == 2) {
      MOELAB_TILE_LOAD(7, b + p * n + kTile, 4 * n);
      MOELAB_TILE_DOT(1, 4, 7);
    }
    if constexpr (RT == 2) {
      MOELAB_TILE_LOAD(5, a + kTile * a_step + p, 4 * a_step);
      MOELAB_TILE_DOT(2, 5, 6);
    }
    if constexpr (RT == 2 && CT == 2) MOELAB_TILE_DOT(3, 5, 7);
  }
  if constexpr (std::is_same_v<Out, float>) {
    // Full tiles of an fp32 c take the accumulators as they are.
    if (rows == kTile * RT) {
      MOELAB_TILE_STORE(0, c, 4 * n);
      if constexpr (CT == 2) MOELAB_TILE_STORE(1, c + kTile, 4 * n);
      if constexpr (RT == 2) MOELAB_TILE_STORE(2, c + kTile * n, 4 * n);
      if constexpr (RT == 2 && CT == 2) MOELAB_TILE_STORE(3, c + kTile * n + kTile, 4 * n);
      return;
    }
  }
  alignas(64) float acc[4][kTile][kTile];
  MOELAB_TILE_STORE(0, acc[0], 64);
  if constexpr (CT == 2) MOELAB_TILE_STORE(1, acc[1], 64);
  if constexpr (RT == 2) MOELAB_TILE_STORE(2, acc[2], 64);
  if constexpr (RT == 2 && CT == 2) MOELAB_TILE_STORE(3, acc[3], 64);
  // Tile 2 rt + ct holds rows 16 rt.. and columns 16 ct.. of c.
  for (int rt = 0; rt < RT; ++rt) {
    for (int64_t i = 0; i < std::min(kTile, rows - kTile * rt); ++i) {
      Out* c_row = c + (kTile * rt + i) * n;
      if constexpr (CT == 2) {
        store_rows(acc[2 * rt][i], acc[2 * rt + 1][i], c_row);
      } else {
        store_row(acc[2 * rt][i], c_row);
      }
    }
  }
}

template <typename Out>
using TileProduct = void (*)(const Word*, int64_t, const Word*, int64_t, int64_t, Out*, int64_t);
// tile_products<Out>[RT - 1][CT - 1].
template <typename Out>
const TileProduct<Out> tile_products[2][2] = {{&tile_product<Out, 1, 1>, &tile_product<Out, 1, 2>},
                                              {&tile_product<Out, 2, 1>, &tile_product<Out, 2, 2>}};

}  // namespace

bool amx_usable() {
  // at::cpu::init_amx asks Linux (5.16+) for the process's 8 KB of tile state
  // (arch_prctl): without it the first tile instruction faults.
  static const bool usable = cpu_features().amx_bf16 && at::cpu::init_amx();
  return usable;
}

template <typename Out>
void run_gemms_amx(const std::vector<TiledGemm<Word, Out>>& gemms, int64_t n) {
  parallel_over_blocks(gemms, n, kBlock, kBlock, [&](const Block* first, const Block* last) {
    configure_tiles();
    // A tile of the last rows of a GEMM, zero past them: a tile load reads 16
    // rows, and those past the last row may lie past the end of the buffer.
    std::vector<Word> spare;
    for (const Block* blk_at = first; blk_at != last; ++blk_at) {
      const Block& blk = *blk_at;
      const TiledGemm<Word, Out>& g = gemms[blk.gemm];
      const int64_t row_end = std::min(blk.row + kBlock, g.rows);
      const int64_t col_end = std::min(blk.col + kBlock, n);
      for (int64_t r = blk.row; r < row_end; r += 2 * kTile) {
        const int64_t rows = std::min(2 * kTile, row_end - r);
        const Word* a = g.a + r * g.row_step;
        int64_t a_step = g.row_step;
        if (rows % kTile != 0) {
          spare.assign(2 * kTile * g.k, 0);
          for (int64_t row = 0; row < rows; ++row) {
            std::memcpy(spare.data() + row * g.k, a + row * g.row_step, 4 * g.k);
          }
          a = spare.data();
          a_step = g.k;
        }
        const int64_t row_tiles = (rows + kTile - 1) / kTile;
        for (int64_t col = blk.col; col < col_end; col += 2 * kTile) {
          const int64_t col_tiles = std::min<int64_t>(2, (col_end - col) / kTile);
          tile_products<Out>[row_tiles - 1][col_tiles - 1](a, a_step, g.b + col, n, g.k,
                                                           g.c + r * n + col, rows);
        }
      }
    }
    release_tiles();
  });
}

template void run_gemms_amx(const std::vector<TiledGemm<Word, uint16_t>>&, int64_t);
template void run_gemms_amx(const std::vector<TiledGemm<Word, float>>&, int64_t);

}  // namespace moelab::grouped_gemm

#endif  // MOELAB_BF16_DOT_KERNEL
