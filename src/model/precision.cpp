#include "model/precision.h"

namespace moelab {

bool bf16_is_native(const torch::Device& device, const CpuFeatures& cpu) {
  return device.is_cuda() || !cpu.native_bf16().empty();
}

PrecisionChoice resolve_precision(Precision requested, const torch::Device& device,
                                  const CpuFeatures& cpu) {
  if (requested != Precision::kAuto) {
    return {requested, "train.precision = \"" + choice_name(requested) + "\""};
  }
  if (device.is_cuda()) return {Precision::kBf16, "auto: bf16 on CUDA"};
  const auto features = cpu.native_bf16();
  if (!features.empty()) {
    std::string names;
    for (const auto& f : features) names += (names.empty() ? "" : ", ") + f;
    return {Precision::kBf16, "auto: this CPU has native bf16 matmul (" + names + ")"};
  }
  return {Precision::kFp32,
          "auto: this CPU has no native bf16 matmul (no amx_bf16 or avx512_bf16 flag); "
          "bf16 would be emulated"};
}

}  // namespace moelab
