// Routing analysis (`moelab analyze routing`): how a trained MoE's routers
// spread each data set's tokens over the experts. A set's validation windows
// run through the model as in evaluation (evaluator.h); each MoE layer's kept
// assignments (MoeLayerStats::kept: the router's choices after capacity) are
// counted per global expert and summed over the data-parallel ranks, so the
// counts are the same at every (world, ep) layout. The report gives, per MoE
// layer and set, each expert's share of the assignments, the entropy of those
// shares and the top experts; per layer the Jensen-Shannon divergence between
// every two sets (expert_distribution.h), and its mean over the layers. The
// counting itself is routing_counts.h.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace moelab {

struct RoutingSet {
  std::string name;
  std::string dir;  // a prepared dataset
};

// "NAME=DATASET"; InputError naming the argument when either part is missing.
RoutingSet parse_routing_set(const std::string& arg);

// Writes the report atomically into `dir`: routing.json, and as CSV
// routing_experts.csv (layer,set,expert,assignments,share), routing_sets.csv
// (layer,set,assignments,entropy,top_experts) and routing_jsd.csv
// (layer,set_a,set_b,jsd; layer "mean" for the mean over layers).
void write_routing_report(const nlohmann::json& report, const std::string& dir);

struct RoutingAnalysisOptions {
  std::string checkpoint;
  std::vector<std::string> sets;  // NAME=DATASET
  std::string split = "val";
  std::string out_dir = "routing";
  int64_t batches = 0;  // forward passes per set (0 = every window)
  int64_t batch_seqs = 16;
  int64_t seq_len = 0;  // tokens a window (0 = the model's seq_len)
  int64_t ep = 1;
  int64_t top = 3;
  int64_t dump_windows = 0;  // > 0: routing_tokens.jsonl of each set's first windows
};

// Loads the checkpoint, counts every set and returns the report; rank 0
// writes it to out_dir. Collective.
nlohmann::json analyze_routing(const RoutingAnalysisOptions& opts);

}  // namespace moelab
