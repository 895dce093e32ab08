// The peak memory of a stretch of work (a step's phase, for `peak_mib` in
// metrics.jsonl). On CUDA: the caching allocator's peak of allocated bytes on
// the device. On the CPU: the process's peak resident set (VmHWM), whose mark
// util/memory.h resets.
#pragma once

#include <torch/torch.h>

namespace moelab {

class PeakMemory {
 public:
  explicit PeakMemory(const torch::Device& device);
  // Starts a new stretch.
  void reset();
  // MiB at the peak since reset(); NaN where this system cannot tell.
  double peak_mib() const;

 private:
  torch::Device device_;
  bool resettable_ = true;  // false once the CPU mark could not be reset
};

}  // namespace moelab
