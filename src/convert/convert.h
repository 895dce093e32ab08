// `moelab upcycle` and `moelab convert`: a dense checkpoint in, the start of an
// MoE run out (checkpoint/run_start.h).
//   upcycle  every FFN becomes E experts that copy it, or slices of it
//            (upcycle.h), with a new router;
//   convert  every FFN's hidden units are partitioned into E disjoint experts
//            of d_ff / E units: "random" (random_partition), "cluster"
//            (balanced k-means, cluster_partition) or "dot" (a learned
//            balanced transport assignment and router, dot_moe.h; its routers
//            replace the random ones). Each expert's w2 is
//            multiplied by top_k, so a token whose k gates are equal (1/k)
//            gets its k experts' units at full strength; with top_k = E and a
//            zero router the MoE computes the dense FFN exactly.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "convert/conversion_options.h"

namespace moelab {

struct UpcycleRequest {
  std::string dense_checkpoint;
  std::string out;
  UpcycleOptions upcycle;  // experts, granularity, reinit fraction, seed
  int64_t top_k = 2;
  double router_init_std = -1;           // < 0: the model's init_std
  std::vector<std::string> overrides{};  // on the dense config (load_dense_checkpoint)
};

struct ConvertRequest {
  std::string dense_checkpoint;
  std::string out;
  std::string method = "cluster";  // "random" | "cluster" | "dot"
  int64_t experts = 8;
  int64_t top_k = 4;
  int64_t cluster_iterations = 25;
  uint64_t seed = 0;
  double router_init_std = -1;           // < 0: the model's init_std
  DotOptions dot;                        // "dot": calibration settings (its experts, top_k,
                                         // seed, cluster_iterations and router std are the above)
  std::vector<std::string> overrides{};  // on the dense config (load_dense_checkpoint)
};

// Each returns the weights' checkpoint folder; <out>/config.toml starts from it.
std::string upcycle_checkpoint(const UpcycleRequest& request);
std::string convert_checkpoint(const ConvertRequest& request);

}  // namespace moelab
