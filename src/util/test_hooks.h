// Faults a test injects into a real run: a loss made non-finite, a checkpoint
// write slowed down, a rank made slow, a rank's CPU measured otherwise. All off in a production
// run: only the test entry point (tests/tools/moelab_test_hooks.cpp, built with the tests) sets
// them, from its own command line; nothing in the moelab binary reads an environment variable or a
// config key for them.
#pragma once

#include <cstdint>
#include <map>

namespace moelab {

struct TestHooks {
  int64_t nonfinite_step = -1;    // the step (from 1) whose loss is made NaN
  int slow_checkpoint_rank = -1;  // the rank whose checkpoint writes take slow_checkpoint_s longer
  double slow_checkpoint_s = 0;
  int slow_rank = -1;  // the rank that works slow_rank_ms longer every step
  double slow_rank_ms = 0;
  // Ranks whose CPU reports native bf16 (avx512_bf16) and measures its bf16
  // matmuls at the mapped multiple of its fp32 rate, for train.precision = "auto".
  std::map<int, double> bf16_speedup;
};

const TestHooks& test_hooks();
void set_test_hooks(const TestHooks& hooks);

}  // namespace moelab
