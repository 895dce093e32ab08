// The settings of each way a dense FFN becomes experts (upcycle.h,
// dot_moe.h), apart from the code that uses them: the command line fills them
// without needing torch.
#pragma once

#include <cstdint>

namespace moelab {

// Sparse upcycling (upcycle.h).
struct UpcycleOptions {
  int64_t experts = 8;
  int64_t granularity = 1;
  double reinit_fraction = 0.0;
  uint64_t seed = 0;  // draws the re-initialised units and their values
};

// DOT-MoE's calibration (dot_moe.h).
struct DotOptions {
  int64_t experts = 8;
  int64_t top_k = 4;
  int64_t steps = 100;  // calibration batches
  double temperature = 0.1;
  int64_t sinkhorn_iterations = 20;
  double lr_scores = 0.05;
  double lr_router = 1e-2;
  double score_init = 1.0;
  double router_init_std = 0.02;
  int64_t cluster_iterations = 25;
  uint64_t seed = 0;
};

}  // namespace moelab
