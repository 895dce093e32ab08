// A named range in LibTorch profiler traces (a RecordFunction user scope, as
// RECORD_USER_SCOPE makes): the step's phases, the MoE layer's route, dispatch,
// experts and combine, and the all-to-all exchanges appear by name in a trace.
// When no profiler runs it costs one check of a thread-local flag.
#pragma once

#include <ATen/record_function.h>

namespace moelab {

class TraceScope {
 public:
  // `name` must outlive the scope (a string literal).
  explicit TraceScope(const char* name) {
    if (range_.isActive()) range_.before(name);
  }
  TraceScope(const TraceScope&) = delete;
  TraceScope& operator=(const TraceScope&) = delete;

 private:
  at::RecordFunction range_{at::RecordScope::USER_SCOPE};
};

}  // namespace moelab
