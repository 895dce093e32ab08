#include "model/precision.h"

#include <fstream>
#include <sstream>

namespace moelab {

const std::vector<std::string>& native_bf16_cpu_features() {
  static const std::vector<std::string> features = [] {
    std::vector<std::string> found;
    std::ifstream cpuinfo("/proc/cpuinfo");
    std::string line;
    while (std::getline(cpuinfo, line)) {
      if (line.rfind("flags", 0) != 0) continue;
      std::istringstream words(line.substr(line.find(':') + 1));
      std::string flag;
      while (words >> flag) {
        if (flag == "amx_bf16" || flag == "avx512_bf16") found.push_back(flag);
      }
      break;  // every core lists the same flags
    }
    return found;
  }();
  return features;
}

bool bf16_is_native(const torch::Device& device) {
  return device.is_cuda() || !native_bf16_cpu_features().empty();
}

PrecisionChoice resolve_precision(const std::string& requested, const torch::Device& device) {
  if (requested != "auto") return {requested, "train.precision = \"" + requested + "\""};
  if (device.is_cuda()) return {"bf16", "auto: bf16 on CUDA"};
  const auto& features = native_bf16_cpu_features();
  if (!features.empty()) {
    std::string names;
    for (const auto& f : features) names += (names.empty() ? "" : ", ") + f;
    return {"bf16", "auto: this CPU has native bf16 matmul (" + names + ")"};
  }
  return {"fp32",
          "auto: this CPU has no native bf16 matmul (no amx_bf16 or avx512_bf16 flag); "
          "bf16 would be emulated"};
}

}  // namespace moelab
