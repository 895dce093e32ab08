#include "data/mixture_schedule.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>

#include "util/error.h"

namespace moelab {
namespace {

// Largest-remainder rounding of weights to integer shares of kMixtureScale.
std::vector<int64_t> integer_shares(const std::vector<double>& weights) {
  const double total = std::accumulate(weights.begin(), weights.end(), 0.0);
  std::vector<int64_t> shares(weights.size());
  std::vector<std::pair<double, size_t>> remainders;
  int64_t given = 0;
  for (size_t s = 0; s < weights.size(); ++s) {
    const double exact = weights[s] / total * double(kMixtureScale);
    shares[s] = int64_t(std::floor(exact));
    given += shares[s];
    remainders.emplace_back(exact - double(shares[s]), s);
  }
  // Largest remainder first; the lower index on a tie, so the result is deterministic.
  std::sort(remainders.begin(), remainders.end(), [](const auto& a, const auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  });
  for (size_t i = 0; given < kMixtureScale; ++i, ++given) ++shares[remainders[i].second];
  return shares;
}

}  // namespace

MixtureSchedule::MixtureSchedule(const std::vector<double>& weights) {
  if (weights.empty()) throw InputError("a data mixture needs at least one source");
  for (size_t s = 0; s < weights.size(); ++s) {
    if (!(weights[s] > 0) || !std::isfinite(weights[s])) {
      throw InputError("source " + std::to_string(s) + " of the data mixture has weight " +
                       std::to_string(weights[s]) + "; expected a finite number > 0");
    }
  }
  shares_ = integer_shares(weights);
  for (size_t s = 0; s < shares_.size(); ++s) {
    if (shares_[s] == 0) {
      throw InputError("source " + std::to_string(s) + " of the data mixture has a weight below " +
                       "1/" + std::to_string(kMixtureScale) + " of the total");
    }
  }
  // at() jumps whole periods: one period must hold exactly each share, which
  // brings every credit back to 0. Checked once (a few milliseconds).
  MixturePosition period;
  for (int64_t g = 0; g < kMixtureScale; ++g) next(&period);
  if (period.taken != shares_) throw std::logic_error("the mixture schedule is not periodic");
}

size_t MixtureSchedule::next(MixturePosition* pos) const {
  if (pos->taken.size() != shares_.size()) pos->taken.assign(shares_.size(), 0);
  // Counted within the current period (each period starts with every credit at
  // 0), so the products stay below 2^41 however long the run.
  const int64_t period = pos->samples / kMixtureScale;
  const int64_t into_period = pos->samples % kMixtureScale + 1;
  size_t best = 0;
  int64_t best_credit = 0;
  for (size_t s = 0; s < shares_.size(); ++s) {
    const int64_t taken = pos->taken[s] - period * shares_[s];
    const int64_t credit = into_period * shares_[s] - taken * kMixtureScale;
    if (s == 0 || credit > best_credit) best = s, best_credit = credit;
  }
  ++pos->taken[best];
  ++pos->samples;
  return best;
}

MixturePosition MixtureSchedule::at(int64_t samples) const {
  MixturePosition pos;
  const int64_t periods = samples / kMixtureScale;
  pos.samples = periods * kMixtureScale;
  for (int64_t share : shares_) pos.taken.push_back(periods * share);
  while (pos.samples < samples) next(&pos);
  return pos;
}

}  // namespace moelab
