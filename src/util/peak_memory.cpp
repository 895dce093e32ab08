#include "util/peak_memory.h"

#include <spdlog/spdlog.h>

#include <cmath>
#include <fstream>
#include <string>

#ifdef MOELAB_WITH_NCCL
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace moelab {
namespace {

// VmHWM of /proc/self/status in MiB; NaN if it cannot be read.
double resident_peak_mib() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;  // kB
  }
  return NAN;
}

}  // namespace

PeakMemory::PeakMemory(const torch::Device& device) : device_(device) {}

void PeakMemory::reset() {
#ifdef MOELAB_WITH_NCCL
  if (device_.is_cuda()) {
    c10::cuda::CUDACachingAllocator::resetPeakStats(device_.index() < 0 ? 0 : device_.index());
    return;
  }
#endif
  if (!resettable_) return;
  std::ofstream clear("/proc/self/clear_refs");
  clear << "5";
  clear.flush();
  if (!clear) {
    resettable_ = false;
    spdlog::warn("/proc/self/clear_refs cannot be written: no peak memory per phase");
  }
}

double PeakMemory::peak_mib() const {
#ifdef MOELAB_WITH_NCCL
  if (device_.is_cuda()) {
    const auto stats =
        c10::cuda::CUDACachingAllocator::getDeviceStats(device_.index() < 0 ? 0 : device_.index());
    // Entry 0 is StatType::AGGREGATE (every pool), in every LibTorch 2.x.
    return double(stats.allocated_bytes[0].peak) / (1024.0 * 1024.0);
  }
#endif
  return resettable_ ? resident_peak_mib() : NAN;
}

}  // namespace moelab
