// Seeded permutations and uniform draws from an own RNG (splitmix64 +
// Fisher-Yates), so orders never change with library versions or rank counts.
// Used for the global window order of each epoch (stream = epoch) and for
// carving validation documents out of a corpus.
#pragma once

#include <cstdint>
#include <vector>

namespace moelab {

uint64_t splitmix64(uint64_t* state);
// Uniform in [0, bound), bound > 0, without modulo bias.
uint64_t uniform_below(uint64_t bound, uint64_t* state);
// Initial RNG state for (seed, stream): nearby seeds/streams give unrelated draws.
uint64_t rng_state(uint64_t seed, int64_t stream);

// A permutation of [0, n) that depends only on (n, seed, stream).
std::vector<int64_t> seeded_permutation(int64_t n, uint64_t seed, int64_t stream);

}  // namespace moelab
