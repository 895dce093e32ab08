// Which source each training sequence of a mixture comes from: a smooth
// weighted round robin (nginx's) over the global sample index, so the choice
// depends on nothing but the weights and the index: not on ranks, the
// expert-parallel layout, the batch size or where a run resumed.
//
// Weights are rounded to integer shares of kMixtureScale (largest remainder);
// sample g goes to the source whose credit (g + 1) * share - taken * scale is
// largest (the lowest index on a tie). The order repeats every kMixtureScale
// samples, each source taking exactly its share of them (the constructor
// checks it), and after any g samples |taken_s - g * share_s / kMixtureScale|
// < 1 (the tests check it over a whole period for several weight sets): the
// realised mixture is the weights to within 1 / g plus the rounding,
// 1 / kMixtureScale.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace moelab {

constexpr int64_t kMixtureScale = int64_t(1) << 20;

// Where the schedule stands after `samples` samples: how many each source took.
struct MixturePosition {
  int64_t samples = 0;
  std::vector<int64_t> taken;
};

class MixtureSchedule {
 public:
  // InputError if a weight is not > 0 or rounds to a share of 0.
  explicit MixtureSchedule(const std::vector<double>& weights);

  const std::vector<int64_t>& shares() const { return shares_; }
  // The source of sample pos->samples; advances *pos past it.
  size_t next(MixturePosition* pos) const;
  // The position after `samples` samples (at most one period simulated).
  MixturePosition at(int64_t samples) const;

 private:
  std::vector<int64_t> shares_;  // sum kMixtureScale
};

}  // namespace moelab
