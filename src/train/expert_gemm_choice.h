// train.expert_gemm resolved for a run: a forced path checked against the
// run's experts, or "auto": the path a resumed checkpoint ran, else the
// fastest measured on this run's shape (model/expert_gemm.h). Every rank
// measures at once (as they will train: sharing the machine), and rank 0's
// choice is every rank's, so all run one path.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "comm/communicator.h"
#include "config/config.h"
#include "model/expert_gemm.h"
#include "model/transformer.h"

namespace moelab {

// The experts one rank holds in each MoE layer, from the config (so that every
// rank decides alike, whichever widths it holds): ep ranks share them.
ExpertShape expert_shape(const Config& cfg, int64_t ep, torch::ScalarType dtype,
                         const torch::Device& device);

// The rows each expert gets from `tokens` tokens a rank (one micro-batch)
// under balanced routing: an expert's rows come from the ep ranks sharing it.
int64_t balanced_rows_per_expert(const Config& cfg, int64_t tokens, int64_t ep);

// rows_per_expert: the rows an expert gets in one micro-batch when routing is
// balanced. resumed: the path the checkpoint resumed from ran, if any.
// Sets the choice on every MoE layer's experts. Collective over `world`.
ExpertGemmChoice choose_expert_gemm(const Config& cfg, TransformerImpl& model,
                                    const ExpertShape& shape, int64_t rows_per_expert,
                                    std::optional<ExpertGemm> resumed, Communicator& world);

}  // namespace moelab
