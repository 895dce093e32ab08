// The phases of one training step, one after another: each one's wall time
// (`time_ms` in metrics.jsonl), peak memory (`peak_mib`, when given a meter) and
// a range of the same name in profiler traces.
#pragma once

#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>

#include "util/peak_memory.h"
#include "util/stopwatch.h"
#include "util/trace_scope.h"

namespace moelab {

class StepPhases {
 public:
  // `memory` null: no peak_mib (the step is not logged).
  explicit StepPhases(PeakMemory* memory) : memory_(memory) {}
  // Ends the open phase, if any, and opens `name` (a string literal).
  void begin(const char* name) {
    end();
    if (memory_) memory_->reset();
    watch_.lap();
    name_ = name;
    range_.emplace(name);
  }
  void end() {
    if (!name_) return;
    range_.reset();
    time_ms[name_] = watch_.lap();
    const double peak = memory_ ? memory_->peak_mib() : NAN;
    if (!std::isnan(peak)) peak_mib[name_] = peak;
    name_ = nullptr;
  }

  nlohmann::json time_ms = nlohmann::json::object();
  nlohmann::json peak_mib = nlohmann::json::object();

 private:
  PeakMemory* memory_;
  Stopwatch watch_;
  const char* name_ = nullptr;
  std::optional<TraceScope> range_;
};

}  // namespace moelab
