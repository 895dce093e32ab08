// The counting half of the routing analysis (routing_analysis.h): each MoE
// layer's kept assignments per expert over a set's windows, and the report
// made of every set's counts.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "data/validation_set.h"
#include "model/transformer.h"

namespace moelab {

// [moe layers, experts] int64 on the CPU: kept assignments over the windows of
// `val`, summed over the data-parallel ranks. Collective.
torch::Tensor count_routed_assignments(Transformer& model, const ValidationSet& val,
                                       int64_t batch_seqs, Communicator* dp,
                                       const torch::Device& device);

struct SetCounts {
  std::string name;
  torch::Tensor counts_LE;  // count_routed_assignments
};

// The report as JSON: `layers` are the block indices of the MoE layers (the
// rows of every set's counts), `top` how many top experts each set lists.
nlohmann::json routing_report(const std::vector<SetCounts>& sets,
                              const std::vector<int64_t>& layers, int64_t top);

}  // namespace moelab
