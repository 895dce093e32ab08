// Token-level routing (`moelab analyze routing --dump-windows N`): for a set's
// first validation windows, each input token's id, its text (the dataset's
// tokenizer decoding that id alone) and the experts every MoE layer kept for
// it (-1: dropped by capacity). One process: the windows are not split over
// ranks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/tokenizer.h"
#include "data/validation_set.h"
#include "model/transformer.h"

namespace moelab {

// JSON Lines, one window a line: {"set", "window", "tokens": [ids], "pieces":
// [texts], "experts": {"<layer>": [[k expert ids] per token]}}, for every
// window of `val`, `batch_seqs` a forward pass (as routing analysis counts
// them, so capacity drops the same assignments). `layers` are the MoE layers'
// block indices, in order.
std::string token_routing_lines(Transformer& model, const ValidationSet& val, int64_t batch_seqs,
                                const Tokenizer& tokenizer, const std::string& set,
                                const std::vector<int64_t>& layers, const torch::Device& device);

}  // namespace moelab
