// A 16 x 16 block of 32-bit values (fp32, or a pair of bf16) transposed in
// AVX-512F registers: the CPU kernels' packing of transposed operands.
#pragma once

#include <cstdint>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

namespace moelab::cpu {

// GCC 12 warns of the self-initialised "undefined" vectors inside the
// intrinsics' headers once inlined here (a false positive).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

// out[j * stride + q] = r[q][j] for a 16 x 16 block of 32-bit values r[q] (16
// each): pairs of 32-bit values, then of 64-bit values, then 128-bit lanes
// swapped.
template <typename T>
__attribute__((target("avx512f"))) inline void store_transposed(const __m512i (&r)[16], T* out,
                                                                int64_t stride) {
  static_assert(sizeof(T) == 4, "32-bit values");
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

#pragma GCC diagnostic pop

}  // namespace moelab::cpu

#endif
