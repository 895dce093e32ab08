// train.precision: "fp32", "bf16", or "auto" (the default): bf16 on CUDA, and
// on a CPU where bf16 matmul is native (AMX-BF16 or AVX512-BF16) and measured
// clearly faster than fp32's; fp32 elsewhere. A CPU without either emulates bf16
// matmul at a small fraction of its fp32 speed (measured on an AVX2-only EPYC:
// 4 GFLOP/s against 140), so it is not even measured there; native is not
// enough either: a Xeon whose AMX is hidden (by its hypervisor) runs AVX512-BF16
// dot products at half its fp32 FMAs' FLOP rate, and its bf16 matmuls at half
// its fp32 ones'.
#pragma once

#include <torch/torch.h>

#include <string>

#include "comm/communicator.h"
#include "config/choices.h"
#include "util/cpu_features.h"

namespace moelab {

struct PrecisionChoice {
  Precision precision;  // kFp32 or kBf16, never kAuto (choice_name spells it for logs)
  std::string reason;   // for the start-up log, e.g. "auto: bf16 on CUDA"

  // The dtype matmuls run in.
  torch::ScalarType dtype() const {
    return precision == Precision::kBf16 ? torch::kBFloat16 : torch::kFloat;
  }
};

// LibTorch's matmul rates on the CPU, in FLOP/s, on `threads` threads.
struct MatmulRates {
  double bf16 = 0, fp32 = 0;
  int threads = 1;
};

// This process's CPU matmul rates at its current threads (a run sets
// train.threads first: bf16 and fp32 need not scale alike): 512 x 512 products,
// bf16 and fp32 in turn, the median of 24 rounds (cpu_matmul_flops_in_turn; a
// tenth of a second on a CPU whose fp32 runs at 300 GFLOP/s), measured once,
// on first use.
MatmulRates cpu_matmul_rates();

// bf16 rounds every matmul's inputs: "auto" takes it on a CPU only where its
// matmuls measure at least this many times as fast as fp32's.
constexpr double kBf16MinSpeedup = 1.25;

// Resolves kAuto on `device` with `cpu`'s features and, on a CPU with native
// bf16, its measured `rates` (called only there); kFp32 and kBf16 are kept as
// they are.
PrecisionChoice resolve_precision(Precision requested, const torch::Device& device,
                                  const CpuFeatures& cpu = cpu_features(),
                                  MatmulRates (*rates)() = cpu_matmul_rates);

// A run's precision: resolve_precision on each rank, rank 0's choice taken by
// every rank of `world` (whose measurements may differ by a hair). Collective.
PrecisionChoice agreed_precision(Precision requested, const torch::Device& device,
                                 Communicator& world, const CpuFeatures& cpu = cpu_features(),
                                 MatmulRates (*rates)() = cpu_matmul_rates);

}  // namespace moelab
