// What `train` records for a researcher who asks: LibTorch's profiler over
// train.profile_steps, written as a Chrome/Perfetto trace to
// <run>/profile/rank<r>.json on rank 0 (or every rank, train.profile_ranks =
// "all"); and, on CUDA, the caching allocator's snapshot after
// train.memory_snapshot_step, for PyTorch's memory viewer.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>

#include "config/config.h"

namespace moelab {

class StepProfiler {
 public:
  StepProfiler(const Config& cfg, int rank, const torch::Device& device);
  // A run that ends inside the profiled steps still writes its trace.
  ~StepProfiler();
  StepProfiler(const StepProfiler&) = delete;
  StepProfiler& operator=(const StepProfiler&) = delete;

  // Around each optimizer step, counted from 1.
  void before_step(int64_t step);
  void after_step(int64_t step);

 private:
  void start_trace();
  void write_trace();
  void write_memory_snapshot();

  int64_t first_ = 0, last_ = -1;  // the profiled steps; none when last_ < first_
  int64_t snapshot_step_ = 0;
  bool this_rank_ = false;
  bool tracing_ = false;
  bool cuda_ = false;
  std::string trace_path_, snapshot_path_;
};

}  // namespace moelab
