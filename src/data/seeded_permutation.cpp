#include "data/seeded_permutation.h"

#include <numeric>
#include <utility>

namespace moelab {

uint64_t splitmix64(uint64_t* state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

uint64_t uniform_below(uint64_t bound, uint64_t* state) {
  // Reject draws from the incomplete last bucket of size UINT64_MAX % bound.
  const uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
  uint64_t value = splitmix64(state);
  while (value >= limit) value = splitmix64(state);
  return value % bound;
}

uint64_t rng_state(uint64_t seed, int64_t stream) {
  uint64_t state = seed;
  return splitmix64(&state) ^ static_cast<uint64_t>(stream);
}

std::vector<int64_t> seeded_permutation(int64_t n, uint64_t seed, int64_t stream) {
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  uint64_t state = rng_state(seed, stream);
  for (int64_t i = n - 1; i > 0; --i) {
    const auto j = static_cast<int64_t>(uniform_below(static_cast<uint64_t>(i) + 1, &state));
    std::swap(order[i], order[j]);
  }
  return order;
}

}  // namespace moelab
