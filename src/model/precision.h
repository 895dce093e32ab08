// train.precision: "fp32", "bf16", or "auto" (the default): bf16 where bf16
// matmul is native (CUDA, or a CPU with AMX-BF16 or AVX512-BF16), fp32 elsewhere.
// A CPU without either emulates bf16 matmul at a small fraction of its fp32
// speed (measured on an AVX2-only EPYC: 4 GFLOP/s against 140), so "auto" never
// picks bf16 there.
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

namespace moelab {

// This CPU's native bf16 matmul features among "amx_bf16" and "avx512_bf16"
// (from /proc/cpuinfo, read once); empty when it has neither.
const std::vector<std::string>& native_bf16_cpu_features();

// Whether bf16 matmul is native on `device`.
bool bf16_is_native(const torch::Device& device);

struct PrecisionChoice {
  std::string precision;  // "fp32" or "bf16"
  std::string reason;     // for the start-up log, e.g. "auto: CPU has avx512_bf16"
};

// Resolves "auto"; "fp32" and "bf16" are kept as they are.
PrecisionChoice resolve_precision(const std::string& requested, const torch::Device& device);

}  // namespace moelab
