// The paths the routed experts' GEMMs can take, and the measured choice among
// them (train.expert_gemm = "auto"). Which path is fastest depends on the CPU
// or GPU, the precision and the shape: moelab's grouped kernel runs the many
// small GEMMs of fine-grained experts in one parallel loop, where LibTorch's
// GEMM (oneDNN, cuBLAS) runs each at a fraction of its peak; on wide experts
// LibTorch's GEMM can be the faster one (fp32 on AMX CPUs). A rule measured on
// one machine loses on the next, so a run times the paths on its own shape
// when it starts.
//
//   grouped         moelab's grouped kernel on a CPU (AMX tiles where the CPU
//                   has them, else AVX512-BF16 dot products; AVX-512F FMAs in
//                   fp32), LibTorch's _grouped_mm on CUDA (bf16).
//   grouped_avx512  the CPU kernel on AVX512-BF16 dot products on a CPU with
//                   AMX too (bf16).
//   per_expert      LibTorch's GEMM, one expert at a time (always runs).
//   padded          LibTorch's batched GEMM over every expert's rows padded to
//                   the largest group (a batch where padding would more than
//                   quadruple the rows runs per expert).
// LibTorch's _grouped_mm on a CPU is not a candidate: its backward fails in
// the torch moelab builds with ("Invalid strides/sizes").
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

#include "config/choices.h"

namespace moelab {

// What decides which paths can run: the experts of one rank's MoE layer.
struct ExpertShape {
  int64_t d_model = 0;
  std::vector<int64_t> widths;  // one per stack of experts of one width
  int64_t experts = 0;          // local experts, all stacks together
  torch::ScalarType dtype = torch::kFloat;
  torch::Device device = torch::kCPU;
};

// Whether `path` can run `shape` (kAuto: never; experts of several widths run per expert).
bool can_run(ExpertGemm path, const ExpertShape& shape);
// Every path that can run `shape`, in ChoiceNames order.
std::vector<ExpertGemm> runnable_paths(const ExpertShape& shape);
// The path taken without measuring (a model outside the trainer, or kAuto
// before the trainer decides): the grouped kernel where it runs, else padded
// in bf16 on a CPU, else per expert.
ExpertGemm rule_path(const ExpertShape& shape);

struct PathTiming {
  ExpertGemm path;
  double seconds;  // one forward and backward, the median of the repeats
};

// Times a forward and backward of experts of `shape` (fresh random weights)
// through each runnable path, on `rows_per_expert` rows each on average (from
// half to 1.5 times as many, other counts each pass): a warm-up, then up to
// `repeats` passes while the path has taken less than a second.
std::vector<PathTiming> time_expert_paths(const ExpertShape& shape, int64_t rows_per_expert,
                                          int repeats = 5);

// The fastest path, but `incumbent` (the rule's) unless another beats it by
// 10%: paths within noise of each other do not flip between two runs. An
// incumbent under a millisecond a pass stays too: there is nothing to win, and
// timings that short are a loaded machine's noise.
ExpertGemm fastest_path(const std::vector<PathTiming>& timings, ExpertGemm incumbent);

// A run's path and why it runs it.
struct ExpertGemmChoice {
  ExpertGemm path = ExpertGemm::kAuto;  // kAuto: the model has no routed experts
  std::string reason;                   // for the start-up log and run.json
};

// "grouped 1.23 ms, per_expert 4.56 ms" for logs and run.json.
std::string describe(const std::vector<PathTiming>& timings);

}  // namespace moelab
