// Wall-clock time per forward phase, for the benchmark's breakdown, and a range
// per phase in profiler traces. The timing is off by default (then a PhaseScope
// costs two branches). On the CPU every op finishes
// before the next starts, so wall time per scope is the phase's cost.
#pragma once

#include <array>
#include <chrono>

#include "util/trace_scope.h"

namespace moelab {

enum class Phase {
  kEmbedding,
  kNorm,
  kAttention,
  kDenseFfn,
  kRoute,
  kDispatch,
  kExperts,
  kCombine,
  kHead,
  kCount
};

const char* phase_name(Phase phase);

class PhaseTimer {
 public:
  static void enable(bool on);
  static bool enabled();
  static void reset();
  static double seconds(Phase phase);
  static void add(Phase phase, double seconds);
};

class PhaseScope {
 public:
  explicit PhaseScope(Phase phase);
  ~PhaseScope();
  PhaseScope(const PhaseScope&) = delete;
  PhaseScope& operator=(const PhaseScope&) = delete;

 private:
  TraceScope range_;
  Phase phase_;
  bool active_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace moelab
