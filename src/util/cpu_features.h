// What this CPU offers that moelab's choices depend on, detected once from
// cpuid: the one place that asks (train.precision = "auto", the grouped fp32
// and bf16 GEMMs and the latter's AMX tiles).
#pragma once

#include <string>
#include <vector>

namespace moelab {

struct CpuFeatures {
  bool avx512f = false;      // 512-bit fp32 FMA (the grouped fp32 GEMM's tiles)
  bool avx512_bf16 = false;  // AVX512F, AVX512BW and AVX512-BF16 (dot products of bf16 pairs)
  bool amx_bf16 = false;     // AMX tiles with bf16 (the tiles still need enabling: amx_enabled())

  // The native bf16 matmul features it has, as /proc/cpuinfo names them:
  // "amx_bf16", "avx512_bf16"; empty when it has neither.
  std::vector<std::string> native_bf16() const;
};

const CpuFeatures& cpu_features();

}  // namespace moelab
