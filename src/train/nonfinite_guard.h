// Guard against non-finite losses: such a step is skipped (no update) and counted;
// after too many in a row the run stops cleanly instead of burning compute on NaNs.
#pragma once

#include <cstdint>

namespace moelab {

class NonfiniteGuard {
 public:
  // max_in_a_row: cfg.train.max_nonfinite_steps.
  explicit NonfiniteGuard(int64_t max_in_a_row) : max_in_a_row_(max_in_a_row) {}

  // True when `loss` is NaN or infinite (the step must be skipped); counts it.
  // A finite loss resets the run of consecutive non-finite ones.
  bool should_skip(double loss);
  // True once max_in_a_row non-finite losses came in a row.
  bool exhausted() const { return consecutive_ >= max_in_a_row_; }

  int64_t consecutive() const { return consecutive_; }
  int64_t total() const { return total_; }
  // Continues the counts saved in a checkpoint, so a resumed run stops where the
  // uninterrupted one would.
  void restore(int64_t total, int64_t consecutive);

 private:
  int64_t max_in_a_row_;
  int64_t consecutive_ = 0;
  int64_t total_ = 0;
};

}  // namespace moelab
