// Each CPU kernel in src/kernels against the plain LibTorch composition it
// replaces, forward + backward, at the shapes of bench_model's reference step
// (4096 tokens, d 256, 4 heads of 64, SwiGLU hidden 1024), in fp32 and bf16;
// the grouped matmul at the fine-grained MoE's gate|up GEMM (64 experts of
// width 128, top-8: 64 groups of 512 rows, 256 -> 256), in bf16 where this CPU
// runs its kernel, also with the rows routed 3:1 unevenly; a fine-grained
// layer's combine (2048 tokens, top-8, d 128).
// Then a fine-grained layer's routing (forward only, no gradient): the top-8 of
// 64 experts for 2048 tokens (moe-small's batch), the sort of their 16384
// assignments by expert and the statistics' counts; and its scores (the
// probabilities, gates and log-sum-exp the losses read) forward + backward.
//
// bench_kernels [--threads 2] [--reps 20]
#include <fmt/format.h>
#include <torch/torch.h>

#include <CLI/CLI.hpp>
#include <functional>
#include <string>

#include "kernels/grouped_matmul.h"
#include "kernels/rms_norm.h"
#include "kernels/rope.h"
#include "kernels/route_counts.h"
#include "kernels/slot_sum.h"
#include "kernels/softmax_route.h"
#include "kernels/swiglu.h"
#include "kernels/top_k.h"
#include "model/rope.h"
#include "model/token_permutation.h"
#include "util/allocator.h"
#include "util/stopwatch.h"

namespace moelab {
namespace {

// Milliseconds per forward + backward, after one warm-up call.
double time_ms(const std::function<torch::Tensor()>& forward, const torch::Tensor& grad, int reps) {
  forward().backward(grad);
  const Stopwatch watch;
  for (int i = 0; i < reps; ++i) forward().backward(grad);
  return watch.peek() / reps;
}

// Milliseconds per call of a function without a backward, after one warm-up call.
double time_forward_ms(const std::function<void()>& call, int reps) {
  call();
  const Stopwatch watch;
  for (int i = 0; i < reps; ++i) call();
  return watch.peek() / reps;
}

void row(const std::string& name, c10::ScalarType dtype, double fused, double reference) {
  fmt::print("{:<10} {:<9} {:>9.2f} {:>12.2f} {:>7.2f}x\n", name, c10::toString(dtype), fused,
             reference, reference / fused);
}

void bench(c10::ScalarType dtype, int reps) {
  const auto opts = torch::TensorOptions(dtype);
  const int64_t tokens = 4096, d = 256, heads = 4, hd = 64, hidden = 1024;
  {
    // The block's norms read the fp32 residual stream and write the compute dtype.
    const auto x = torch::randn({tokens, d}).requires_grad_(true);
    const auto w = torch::ones({d}).requires_grad_(true);
    const auto grad = torch::randn({tokens, d}, opts);
    row("rms_norm", dtype, time_ms([&] { return rms_norm(x, w, 1e-5, dtype); }, grad, reps),
        time_ms([&] { return rms_norm_reference(x, w, 1e-5, dtype); }, grad, reps));
  }
  {
    // Query heads viewed out of the fused qkv projection, as in attention.
    const auto qkv = torch::randn({tokens / 256, 256, 3 * heads * hd}, opts).requires_grad_(true);
    const auto q = [&] {
      return qkv.narrow(-1, 0, heads * hd).view({tokens / 256, 256, heads, hd}).transpose(1, 2);
    };
    const auto tables = make_rope_tables(256, hd, 10000.0);
    const auto grad = torch::randn({tokens / 256, heads, 256, hd}, opts);
    row("rope", dtype, time_ms([&] { return rope(q(), tables.cos, tables.sin); }, grad, reps),
        time_ms([&] { return rope_reference(q(), tables.cos, tables.sin); }, grad, reps));
  }
  {
    const auto gate_up = torch::randn({tokens, 2 * hidden}, opts).requires_grad_(true);
    const auto grad = torch::randn({tokens, hidden}, opts);
    row("swiglu", dtype, time_ms([&] { return swiglu(gate_up); }, grad, reps),
        time_ms([&] { return swiglu_reference(gate_up); }, grad, reps));
  }
  if (grouped_matmul_has_cpu_kernel(dtype)) {
    const int64_t experts = 64, rows = 512, width = 256;
    const std::vector<int64_t> counts(experts, rows);
    const auto x = torch::randn({experts * rows, d}, opts).requires_grad_(true);
    const auto w = torch::randn({experts, width, d}, opts).requires_grad_(true);
    const auto grad = torch::randn({experts * rows, width}, opts);
    const double ms =
        time_ms([&] { return grouped_matmul(x, w.transpose(1, 2), counts); }, grad, reps);
    row("grouped_mm", dtype, ms,
        time_ms([&] { return grouped_matmul_reference(x, w.transpose(1, 2), counts); }, grad,
                reps));
    fmt::print("{:<10} {:<9} {:>9.0f} GFLOP/s\n", "", "",
               6.0 * experts * rows * d * width / ms / 1e6);
    // The same rows routed unevenly, as a router early in training does: the
    // first half of the experts 3 times the rows of the second half.
    std::vector<int64_t> skewed(experts, rows / 2);
    std::fill(skewed.begin(), skewed.begin() + experts / 2, 3 * rows / 2);
    const double skewed_ms =
        time_ms([&] { return grouped_matmul(x, w.transpose(1, 2), skewed); }, grad, reps);
    fmt::print("{:<10} {:<9} {:>9.2f} ms with 3:1 skewed rows ({:.0f} GFLOP/s)\n", "", "",
               skewed_ms, 6.0 * experts * rows * d * width / skewed_ms / 1e6);
    if (dtype == torch::kBFloat16 && grouped_matmul_has_amx()) {
      const double dot_ms = time_ms(
          [&] { return grouped_matmul(x, w.transpose(1, 2), counts, CpuTiles::kAvx512Dot); }, grad,
          reps);
      fmt::print("{:<10} {:<9} {:>9.2f} ms on AVX512-BF16 tiles: AMX tiles {:.2f}x\n", "", "",
                 dot_ms, dot_ms / ms);
    }
  }
  {
    // A fine-grained layer's combine (moe-small: 2048 tokens, top-8, d 128):
    // each slot's expert output read where the dispatch put it, gate-weighted.
    const int64_t tokens = 2048, k = 8, d = 128;
    const auto rows = torch::randn({tokens * k, d}, opts).requires_grad_(true);
    const auto gates = torch::rand({tokens, k}, opts).requires_grad_(true);
    const auto index = torch::randperm(tokens * k, torch::kLong).view({tokens, k});
    const auto grad = torch::randn({tokens, d}, opts);
    row("combine", dtype,
        time_ms([&] { return gather_weighted_slot_sum(rows, index, gates); }, grad, reps),
        time_ms([&] { return gather_weighted_slot_sum_reference(rows, index, gates); }, grad,
                reps));
  }
}

void bench_routing(int reps) {
  const int64_t experts = 64, k = 8;
  const auto logits = torch::randn({2048, experts});
  row("top_k", torch::kFloat32, time_forward_ms([&] { top_k_indices(logits, k); }, reps),
      time_forward_ms([&] { logits.topk(k, -1); }, reps));
  const auto ids = top_k_indices(logits, k);
  const auto sort_by_torch = [&] {
    const auto flat = ids.reshape({-1});
    const auto order = std::get<1>(flat.sort(/*stable=*/true, 0, false));
    torch::empty_like(order).scatter_(0, order, torch::arange(order.numel(), order.options()));
    flat.bincount({}, experts).to(torch::kCPU);
  };
  row("sort", torch::kInt64, time_forward_ms([&] { sort_assignments(ids, experts); }, reps),
      time_forward_ms(sort_by_torch, reps));
  const auto ranks = torch::zeros({experts}, torch::kLong);
  row("counts", torch::kInt64, time_forward_ms([&] { route_counts(ids, ids, ranks); }, reps),
      time_forward_ms([&] { route_counts_reference(ids, ids, ranks); }, reps));
}

// The router's scores as a layer's losses read them (the Switch loss's mean
// probabilities, the gates, the z-loss's log-sum-exp), forward and backward.
void bench_scores(int reps) {
  const int64_t experts = 64, k = 8;
  const auto logits = torch::randn({2048, experts}).requires_grad_(true);
  const auto ids = top_k_indices(logits.detach(), k);
  const auto load = torch::rand({experts}), gate_grad = torch::randn({2048, k});
  const auto losses = [&](const SoftmaxRoute& r) {
    return (r.probs_TE.mean(0) * load).sum() + (r.gates_TK * gate_grad).sum() +
           r.lse_T.pow(2).mean();
  };
  const auto one = torch::ones({});
  row("scores", torch::kFloat32,
      time_ms([&] { return losses(softmax_route(logits, ids, true)); }, one, reps),
      time_ms([&] { return losses(softmax_route_reference(logits, ids, true)); }, one, reps));
}

}  // namespace
}  // namespace moelab

int main(int argc, char** argv) {
  moelab::keep_freed_memory();
  CLI::App app{"moelab CPU kernels against the LibTorch compositions they replace"};
  int threads = 2, reps = 20;
  app.add_option("--threads", threads, "intra-op threads")->check(CLI::PositiveNumber);
  app.add_option("--reps", reps, "timed calls per kernel")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  torch::set_num_threads(threads);
  torch::manual_seed(0);
  fmt::print("ms per forward + backward, {} threads\n{:<10} {:<9} {:>9} {:>12} {:>8}\n", threads,
             "kernel", "dtype", "fused", "composition", "speedup");
  for (const auto dtype : {torch::kFloat32, torch::kBFloat16}) moelab::bench(dtype, reps);
  moelab::bench_scores(reps);
  fmt::print("ms per call, no backward\n");
  moelab::bench_routing(reps);
  return 0;
}
