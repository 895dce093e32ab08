// The matmul rate this machine reaches, measured rather than taken from a
// datasheet: the denominator of model FLOPs utilisation (the FLOPs a step must
// do are model_flops_per_token in config/param_count.h), and what
// train.precision = "auto" weighs on a CPU (model/precision.h).
#pragma once

#include <torch/torch.h>

namespace moelab {

// The practical matmul peak in FLOP/s, in `dtype` on `device`: the best time of
// square products of sizes 256, 512, ... up to max_size (0 = 2048 on a CPU,
// 8192 on a GPU), each repeated for about `seconds_per_size` after a warm-up.
// A size whose single product takes longer than that ends the climb, so an
// emulated dtype (bf16 on an AVX2-only CPU) is measured in well under a second.
// On the CPU it runs with `threads` intra-op threads (0 = the current setting),
// restored afterwards.
double matmul_peak_flops(torch::ScalarType dtype, int threads,
                         const torch::Device& device = torch::Device(torch::kCPU),
                         int64_t max_size = 0, double seconds_per_size = 0.15);

}  // namespace moelab
