// Routing analysis over a study's seeds (`moelab analyze routing STUDY_DIR`):
// each MoE run's report (train/routing_analysis.h) summarised per variant as
// mean ± std over its seeds. Only what is comparable across seeds is
// averaged: each set's routing entropy and the divergence between every two
// sets, per layer and over the layers. An expert's id is not (seed 1's expert
// 3 need not do what seed 0's does), so the shares per expert stay per run.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "study/routing_groups.h"

namespace moelab {

struct RunRouting {
  std::string variant;
  int64_t seed = 0;
  nlohmann::json report;  // routing_report's, for the run's newest checkpoint
};

// {"sets", "variants": [{"variant", "seeds", "layers": [{"layer", "entropy":
// {set: mean_std}, "jsd": [{"sets": [a, b], "jsd": mean_std}]}], "mean_jsd",
// "groups" (study/routing_groups.h)}]} with variants in the order of `runs`.
// InputError when two runs of a variant report different sets or layers.
nlohmann::json summarize_routing(const std::vector<RunRouting>& runs,
                                 const std::vector<SetGroup>& groups = {});

// Writes routing_summary.json, routing_summary_sets.csv
// (variant,layer,set,n,entropy_mean,entropy_std) and routing_summary_jsd.csv
// (variant,layer,set_a,set_b,n,jsd_mean,jsd_std; layer "mean" for the mean
// over layers) and, with groups, routing_summary_groups.csv
// (variant,group,sets,n,within_mean,within_std,outside_mean,outside_std,
// gap_mean,gap_std) into `dir`, atomically.
void write_routing_summary(const nlohmann::json& summary, const std::string& dir);

}  // namespace moelab
