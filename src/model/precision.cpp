#include "model/precision.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "comm/rank0s_choice.h"
#include "util/matmul_peak.h"

namespace moelab {

MatmulRates cpu_matmul_rates() {
  static const MatmulRates rates = [] {
    const auto flops = cpu_matmul_flops_in_turn({torch::kBFloat16, torch::kFloat}, 512, 24);
    return MatmulRates{flops[0], flops[1], torch::get_num_threads()};
  }();
  return rates;
}

PrecisionChoice resolve_precision(Precision requested, const torch::Device& device,
                                  const CpuFeatures& cpu, MatmulRates (*rates)()) {
  if (requested != Precision::kAuto) {
    return {requested, "train.precision = \"" + choice_name(requested) + "\""};
  }
  if (device.is_cuda()) return {Precision::kBf16, "auto: bf16 on CUDA"};
  const auto features = cpu.native_bf16();
  if (features.empty()) {
    return {Precision::kFp32,
            "auto: this CPU has no native bf16 matmul (no amx_bf16 or avx512_bf16 flag); "
            "bf16 would be emulated"};
  }
  const MatmulRates measured = rates();
  const double speedup = measured.bf16 / measured.fp32;
  const std::string reason = fmt::format(
      "auto: on this CPU ({}) bf16 matmul measured {:.2f}x the fp32 rate ({:.0f} against {:.0f} "
      "GFLOP/s on {} thread{})",
      fmt::join(features, ", "), speedup, measured.bf16 / 1e9, measured.fp32 / 1e9,
      measured.threads, measured.threads == 1 ? "" : "s");
  if (speedup >= kBf16MinSpeedup) return {Precision::kBf16, reason};
  return {Precision::kFp32, fmt::format("{}, short of the {:.2f}x that would pay for bf16 "
                                        "rounding",
                                        reason, kBf16MinSpeedup)};
}

PrecisionChoice agreed_precision(Precision requested, const torch::Device& device,
                                 Communicator& world, const CpuFeatures& cpu,
                                 MatmulRates (*rates)()) {
  PrecisionChoice mine = resolve_precision(requested, device, cpu, rates);
  const Precision rank0s = rank0s_choice(mine.precision, world);
  if (rank0s == mine.precision) return mine;
  return {rank0s, "as rank 0 resolved train.precision = \"" + choice_name(requested) + "\""};
}

}  // namespace moelab
