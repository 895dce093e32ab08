#include "util/peak_memory.h"

#include <spdlog/spdlog.h>

#include <cmath>

#include "util/memory.h"

#ifdef MOELAB_WITH_NCCL
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace moelab {

PeakMemory::PeakMemory(const torch::Device& device) : device_(device) {}

void PeakMemory::reset() {
#ifdef MOELAB_WITH_NCCL
  if (device_.is_cuda()) {
    c10::cuda::CUDACachingAllocator::resetPeakStats(device_.index() < 0 ? 0 : device_.index());
    return;
  }
#endif
  if (resettable_ && !reset_resident_peak()) {
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
  return resettable_ ? resident_peak_since_reset_mib() : NAN;
}

}  // namespace moelab
