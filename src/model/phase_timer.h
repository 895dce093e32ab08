// Wall-clock time per forward phase, for the benchmarks' breakdowns, and a range
// per phase in profiler traces. The timing is off by default (then a PhaseScope
// costs two branches). On the CPU every op finishes before the next starts, so
// wall time per scope is the phase's cost; on CUDA the exchanges synchronise, so
// the local phases before them may be under-counted.
#pragma once

#include <optional>

#include "util/stopwatch.h"
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
  // Inside kDispatch and kCombine, from the all-to-all dispatcher:
  kPermute,    // dispatch: sort, gather, regroup
  kExchange,   // both directions: counts and rows
  kUnpermute,  // combine: undo the regroup, sum each token's rows
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
  std::optional<Stopwatch> watch_;  // only while timing is on: no clock read otherwise
};

}  // namespace moelab
