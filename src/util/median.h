// The median of timings, the rule every "measure, then choose" in moelab
// takes: a run that load spared once does not decide, as a best time would.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

namespace moelab {

// The middle value of a non-empty list (the upper of the two middle ones of an
// even count).
inline double median(std::vector<double> values) {
  const auto middle = values.begin() + static_cast<std::ptrdiff_t>(values.size() / 2);
  std::nth_element(values.begin(), middle, values.end());
  return *middle;
}

}  // namespace moelab
