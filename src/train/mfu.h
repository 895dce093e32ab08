// Model FLOPs utilisation: the FLOPs a step must do (by the formula below) over the
// matmul peak this machine reaches, measured rather than taken from a datasheet.
#pragma once

#include <torch/torch.h>

#include "config/config.h"

namespace moelab {

// FLOP/s of a large square matmul in `dtype` on the CPU with `threads` intra-op
// threads (0 = the current setting): the best of a short timed loop after a warm-up.
// The thread setting is restored afterwards.
double matmul_peak_flops(torch::ScalarType dtype, int threads, int64_t size = 2048,
                         double min_seconds = 0.5);

// Training FLOPs per token (forward + backward), the PaLM-paper estimate:
//   6 * N  +  12 * n_layers * seq_len * d_model
// N = active non-embedding parameters including the output head (the head is a
// matmul even when tied; the embedding lookup is not), from count_params: for an
// MoE that counts top_k routed experts, shared experts and the router. The second
// term is the attention scores and weighted sum (QK^T and AV, forward and
// backward) over the full seq_len window, not halved for causality.
double model_flops_per_token(const Config& cfg);

}  // namespace moelab
