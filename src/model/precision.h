// train.precision: "fp32", "bf16", or "auto" (the default): bf16 where bf16
// matmul is native (CUDA, or a CPU with AMX-BF16 or AVX512-BF16), fp32 elsewhere.
// A CPU without either emulates bf16 matmul at a small fraction of its fp32
// speed (measured on an AVX2-only EPYC: 4 GFLOP/s against 140), so "auto" never
// picks bf16 there.
#pragma once

#include <torch/torch.h>

#include <string>

#include "config/choices.h"
#include "util/cpu_features.h"

namespace moelab {

// Whether bf16 matmul is native on `device` (CUDA, or a CPU with `cpu`'s
// amx_bf16 or avx512_bf16).
bool bf16_is_native(const torch::Device& device, const CpuFeatures& cpu = cpu_features());

struct PrecisionChoice {
  Precision precision;  // kFp32 or kBf16, never kAuto (choice_name spells it for logs)
  std::string reason;   // for the start-up log, e.g. "auto: CPU has avx512_bf16"

  // The dtype matmuls run in.
  torch::ScalarType dtype() const {
    return precision == Precision::kBf16 ? torch::kBFloat16 : torch::kFloat;
  }
};

// Resolves kAuto on `device` with `cpu`'s features; kFp32 and kBf16 are kept
// as they are.
PrecisionChoice resolve_precision(Precision requested, const torch::Device& device,
                                  const CpuFeatures& cpu = cpu_features());

}  // namespace moelab
