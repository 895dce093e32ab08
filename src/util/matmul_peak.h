// The matmul rate this machine reaches, measured rather than taken from a
// datasheet: the denominator of model FLOPs utilisation (the FLOPs a step must
// do are model_flops_per_token in config/param_count.h), and what
// train.precision = "auto" weighs on a CPU (model/precision.h).
#pragma once

#include <torch/torch.h>

#include <functional>
#include <vector>

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

// The FLOP/s of n x n products on the CPU in each of `dtypes`, at the current
// threads, measured in turn (median_seconds_in_turn): what weighs one dtype
// against another, whose ratio holds on a machine that other work slows at
// times, where timing one dtype after the other does not.
std::vector<double> cpu_matmul_flops_in_turn(const std::vector<torch::ScalarType>& dtypes,
                                             int64_t n, int rounds);

// The median seconds of each of `tasks` run in turn, one run of each per round
// for `rounds` rounds, timed by `clock` (seconds). Load that comes and goes
// then slows each task in some rounds, and the median is a quiet round's;
// load that stays slows every task alike, or (where the scheduler, not the
// work, sets the time: a timeslice lost at each product's barrier) makes them
// alike, which weighs neither dtype above the other. A best time would not:
// one task spared by the load in one round then looks faster than it is.
std::vector<double> median_seconds_in_turn(const std::vector<std::function<void()>>& tasks,
                                           int rounds, const std::function<double()>& clock);

}  // namespace moelab
