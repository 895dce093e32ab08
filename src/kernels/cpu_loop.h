// Helpers shared by the CPU kernels in this folder. Their inner loops are
// compiled for x86-64-v4 (AVX-512), v3 (AVX2) and baseline x86-64, one picked
// at load time (MOELAB_CPU_CLONES), and vectorised by OpenMP SIMD pragmas.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include <ATen/core/Tensor.h>
#include <c10/util/BFloat16.h>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define MOELAB_CPU_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define MOELAB_CPU_CLONES
#endif

namespace moelab::cpu {

// Whether these loops take t: a CPU tensor of fp32, fp64 or bf16 (the dtypes
// load and store below cover); the kernels fall back to LibTorch otherwise.
inline bool loops_cover(const at::Tensor& t) {
  const auto dtype = t.scalar_type();
  return t.device().is_cpu() &&
         (dtype == at::kFloat || dtype == at::kDouble || dtype == at::kBFloat16);
}

// t's data, or null for an undefined tensor (an optional input or gradient).
template <typename T>
const T* data_or_null(const at::Tensor& t) {
  return t.defined() ? t.data_ptr<T>() : nullptr;
}

// Rows per task of at::parallel_for: enough elements to pay for a task.
inline int64_t row_grain(int64_t width) {
  return std::max<int64_t>(1, 16384 / std::max<int64_t>(width, 1));
}

// c ? a : b as a mask on the bits, not a branch: GCC keeps a float ?: (which
// must pass NaN through) a branch until the vectoriser, and jump threading
// would first copy the code after it into each side.
inline float select(bool c, float a, float b) {
  uint32_t ia, ib;
  std::memcpy(&ia, &a, sizeof(ia));
  std::memcpy(&ib, &b, sizeof(ib));
  const uint32_t mask = 0u - static_cast<uint32_t>(c);
  const uint32_t bits = (ia & mask) | (ib & ~mask);
  float out;
  std::memcpy(&out, &bits, sizeof(out));
  return out;
}

// exp(x) in fp32 without a library call or a branch, so that loops calling it
// vectorise: x = n ln2 + r with |r| <= ln2 / 2, a degree-6 polynomial for exp(r)
// (the Cephes expf coefficients), scaled by 2^n through the exponent bits.
// Relative error about 2e-7; x is clamped to [-87, 88], where 2^n stays normal.
inline float exp_approx(float x) {
  x = select(x < -87.0f, -87.0f, x);
  x = select(x > 88.0f, 88.0f, x);
  const float nf = __builtin_floorf(x * 1.44269504f + 0.5f);
  const float r = (x - nf * 0.693359375f) + nf * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(nf) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return p * scale;
}

// Double inputs (tests, gradient checks) keep full precision.
inline double exp_approx(double x) {
  return __builtin_exp(x);
}

// p[i] loaded and stored in the math dtype (fp32 for bf16). The bf16
// conversions are written out on the raw bits (c10's take a branch and a struct
// access) so that the loops vectorise; the store rounds to nearest even and
// keeps NaN a NaN, as c10::BFloat16 does.
inline float load(const float* p, int64_t i) {
  return p[i];
}
inline double load(const double* p, int64_t i) {
  return p[i];
}
inline float load(const c10::BFloat16* p, int64_t i) {
  const uint32_t bits = static_cast<uint32_t>(reinterpret_cast<const uint16_t*>(p)[i]) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}
inline void store(float* p, int64_t i, float v) {
  p[i] = v;
}
inline void store(double* p, int64_t i, double v) {
  p[i] = v;
}
inline void store(c10::BFloat16* p, int64_t i, float v) {
  uint32_t u;
  std::memcpy(&u, &v, sizeof(u));
  const uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
  reinterpret_cast<uint16_t*>(p)[i] = v != v ? uint16_t{0x7FC0} : static_cast<uint16_t>(rounded);
}
inline void store(c10::BFloat16* p, int64_t i, double v) {
  store(p, i, static_cast<float>(v));
}

}  // namespace moelab::cpu
