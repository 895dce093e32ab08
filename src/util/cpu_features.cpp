#include "util/cpu_features.h"

#include <cpuid.h>

namespace moelab {

std::vector<std::string> CpuFeatures::native_bf16() const {
  std::vector<std::string> names;
  if (amx_bf16) names.emplace_back("amx_bf16");
  if (avx512_bf16) names.emplace_back("avx512_bf16");
  return names;
}

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = [] {
    CpuFeatures f;
#if defined(__x86_64__)
    f.avx512f = __builtin_cpu_supports("avx512f");
    f.avx512_bf16 =
        f.avx512f && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512bf16");
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    constexpr unsigned kAmxBf16 = 1u << 22, kAmxTile = 1u << 24;  // cpuid leaf 7, edx
    f.amx_bf16 = __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) != 0 && (edx & kAmxBf16) != 0 &&
                 (edx & kAmxTile) != 0;
#endif
    return f;
  }();
  return features;
}

}  // namespace moelab
