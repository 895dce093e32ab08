#include "train/expert_distribution.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace moelab {

namespace {

// sum_i p_i ln(p_i / m_i) over the i with p_i > 0 (m_i > 0 there).
double kl_nats(const std::vector<double>& p, const std::vector<double>& m) {
  double sum = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] > 0) sum += p[i] * std::log(p[i] / m[i]);
  }
  return sum;
}

}  // namespace

std::vector<double> shares_of(const std::vector<int64_t>& counts) {
  const double total = double(std::accumulate(counts.begin(), counts.end(), int64_t(0)));
  std::vector<double> shares(counts.size(), 0.0);
  if (total == 0) return shares;
  for (size_t i = 0; i < counts.size(); ++i) shares[i] = double(counts[i]) / total;
  return shares;
}

double entropy_nats(const std::vector<double>& p) {
  double sum = 0;
  for (double pi : p) {
    if (pi > 0) sum -= pi * std::log(pi);
  }
  return sum;
}

double jensen_shannon_nats(const std::vector<double>& p, const std::vector<double>& q) {
  std::vector<double> m(p.size());
  for (size_t i = 0; i < p.size(); ++i) m[i] = (p[i] + q[i]) / 2;
  return (kl_nats(p, m) + kl_nats(q, m)) / 2;
}

std::vector<int64_t> top_experts(const std::vector<double>& p, int64_t n) {
  std::vector<int64_t> ids(p.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::stable_sort(ids.begin(), ids.end(), [&](int64_t a, int64_t b) { return p[a] > p[b]; });
  ids.resize(std::min<size_t>(ids.size(), size_t(std::max<int64_t>(n, 0))));
  return ids;
}

}  // namespace moelab
