// Wall-clock time between laps: the one clock behind every duration moelab
// measures (the step's `time_ms` phases, the forward phases of PhaseScope, the
// benchmarks, a study run's duration).
#pragma once

#include <chrono>

namespace moelab {

class Stopwatch {
 public:
  // Milliseconds since the previous lap (or construction).
  double lap() {
    const auto now = std::chrono::steady_clock::now();
    const double ms = std::chrono::duration<double, std::milli>(now - last_).count();
    last_ = now;
    return ms;
  }
  // Milliseconds since the previous lap (or construction), without a new lap.
  double peek() const {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - last_)
        .count();
  }
  // The same, in seconds.
  double seconds() const { return peek() / 1e3; }

 private:
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
};

}  // namespace moelab
