#include "model/expert_gemm.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>
#include <torch/cuda.h>

#include "kernels/grouped_matmul.h"
#include "model/experts.h"
#include "util/median.h"

namespace moelab {
namespace {

bool tiles_fit(const ExpertShape& shape, int64_t multiple) {
  return shape.d_model % multiple == 0 && shape.widths.front() % multiple == 0;
}

bool grouped_runs(const ExpertShape& shape) {
  if (shape.device.is_cpu()) {
    // Each expert's GEMMs: [d, 2h] for gate and up, [h, d] for down.
    return grouped_matmul_cpu_kernel_fits(shape.dtype, shape.d_model, shape.widths.front());
  }
  // _grouped_mm wants every row of every operand 16-byte aligned (fp32 on a
  // GPU keeps cuBLAS's per-expert GEMMs).
  return shape.dtype == torch::kBFloat16 && tiles_fit(shape, 8);
}

void synchronize(const torch::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index());
}

double seconds_of_forward_backward(ExpertsImpl& experts, const DispatchedTokens& dispatched) {
  synchronize(dispatched.tokens.device());
  const auto start = std::chrono::steady_clock::now();
  experts.forward(dispatched).sum().backward();
  synchronize(dispatched.tokens.device());
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Rows for one timed pass, as routing gives them: never even (each group from
// half the mean to 1.5 times it, so that the padded path pays for its padding)
// and never twice the same (LibTorch's GEMM prepares a kernel per shape, which
// a probe repeating one shape would get for free, and training does not).
DispatchedTokens routed_rows(const ExpertShape& shape, int64_t mean, std::mt19937& rng,
                             at::Generator& values) {
  std::uniform_real_distribution<double> share(0.5, 1.5);
  DispatchedTokens dispatched;
  for (int64_t e = 0; e < shape.experts; ++e) {
    dispatched.counts.push_back(std::max<int64_t>(1, std::llround(double(mean) * share(rng))));
  }
  const int64_t rows = std::accumulate(dispatched.counts.begin(), dispatched.counts.end(), 0L);
  dispatched.tokens =
      torch::randn({rows, shape.d_model}, values).to(shape.device, shape.dtype).requires_grad_();
  return dispatched;
}

}  // namespace

bool can_run(ExpertGemm path, const ExpertShape& shape) {
  if (path == ExpertGemm::kPerExpert) return true;
  const bool one_float_stack =
      shape.widths.size() == 1 && (shape.dtype == torch::kBFloat16 || shape.dtype == torch::kFloat);
  if (!one_float_stack) return false;
  switch (path) {
    case ExpertGemm::kGrouped:
      return grouped_runs(shape);
    case ExpertGemm::kGroupedAvx512:
      // The grouped path where the CPU has AMX, so on AVX512-BF16 tiles the other.
      return shape.device.is_cpu() && shape.dtype == torch::kBFloat16 && grouped_matmul_has_amx() &&
             grouped_runs(shape);
    case ExpertGemm::kPadded:
      return true;
    default:
      return false;
  }
}

std::vector<ExpertGemm> runnable_paths(const ExpertShape& shape) {
  std::vector<ExpertGemm> paths;
  for (const auto& named : ChoiceNames<ExpertGemm>::names) {
    if (can_run(named.value, shape)) paths.push_back(named.value);
  }
  return paths;
}

ExpertGemm rule_path(const ExpertShape& shape) {
  if (can_run(ExpertGemm::kGrouped, shape)) return ExpertGemm::kGrouped;
  const bool cpu_bf16 = shape.device.is_cpu() && shape.dtype == torch::kBFloat16;
  if (cpu_bf16 && can_run(ExpertGemm::kPadded, shape)) return ExpertGemm::kPadded;
  return ExpertGemm::kPerExpert;
}

std::vector<PathTiming> time_expert_paths(const ExpertShape& shape, int64_t rows_per_expert,
                                          int repeats) {
  std::vector<int64_t> ids(static_cast<size_t>(shape.experts));
  std::iota(ids.begin(), ids.end(), 0);
  Experts experts(shape.d_model, shape.widths.front(), ids);
  experts->to(shape.device);
  // Generators of its own: measuring leaves the run's random state as it was.
  std::mt19937 rng(0);
  auto values = at::detail::createCPUGenerator(0);
  {
    torch::NoGradGuard no_grad;
    for (auto& p : experts->parameters()) {
      p.copy_(torch::randn(p.sizes(), values).mul_(0.02));
    }
  }
  std::vector<PathTiming> timings;
  for (ExpertGemm path : runnable_paths(shape)) {
    experts->set_path(path);
    // Warm-up: the allocator, the CPU kernels' packing buffers.
    seconds_of_forward_backward(*experts, routed_rows(shape, rows_per_expert, rng, values));
    // At most `repeats` passes, and no more once a path has taken a second:
    // wide experts' paths are told apart by one pass.
    std::vector<double> seconds;
    double spent = 0;
    while (static_cast<int>(seconds.size()) < repeats && spent < 1.0) {
      seconds.push_back(
          seconds_of_forward_backward(*experts, routed_rows(shape, rows_per_expert, rng, values)));
      spent += seconds.back();
    }
    timings.push_back({path, median(seconds)});
  }
  return timings;
}

ExpertGemm fastest_path(const std::vector<PathTiming>& timings, ExpertGemm incumbent) {
  const auto fastest = std::min_element(
      timings.begin(), timings.end(),
      [](const PathTiming& a, const PathTiming& b) { return a.seconds < b.seconds; });
  if (fastest == timings.end()) return incumbent;
  for (const auto& t : timings) {
    if (t.path == incumbent && (fastest->seconds * 1.1 > t.seconds || t.seconds < 1e-3)) {
      return incumbent;
    }
  }
  return fastest->path;
}

std::string describe(const std::vector<PathTiming>& timings) {
  std::string out;
  for (const auto& t : timings) {
    out += fmt::format("{}{} {:.3f} ms", out.empty() ? "" : ", ", choice_name(t.path),
                       1e3 * t.seconds);
  }
  return out;
}

}  // namespace moelab
