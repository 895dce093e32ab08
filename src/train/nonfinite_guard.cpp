#include "train/nonfinite_guard.h"

#include <cmath>

namespace moelab {

bool NonfiniteGuard::should_skip(double loss) {
  if (std::isfinite(loss)) {
    consecutive_ = 0;
    return false;
  }
  ++consecutive_;
  ++total_;
  return true;
}

void NonfiniteGuard::restore(int64_t total, int64_t consecutive) {
  total_ = total;
  consecutive_ = consecutive;
}

}  // namespace moelab
