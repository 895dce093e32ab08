// Training throughput of the reference dense and MoE models: forward + backward
// tokens/s and MFU, in fp32 and in the "auto" precision (bf16 where it is native,
// else fp32: see model/precision.h), each against the matmul peak measured here
// in the precision it ran in.
//
// FLOPs per step = 6 * (active params - embedding) * tokens        (matmuls, fwd + bwd)
//                + 12 * n_layers * seq_len * d_model * tokens       (attention scores + values)
// The head counts as a matmul; the embedding lookup does not. With a tied head
// the head's matrix still counts (it is the embedding's size).
//
// Usage: bench_model [steps=3] [threads=2] [device=cpu|cuda]
#include <fmt/format.h>
#include <torch/torch.h>
#include <torch/version.h>

#include <chrono>
#include <string>

#include "model/param_count.h"
#include "model/phase_timer.h"
#include "model/precision.h"
#include "model/transformer.h"
#include "train/mfu.h"
#include "util/allocator.h"
#include "util/memory.h"

namespace moelab {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

Config reference_config(bool moe, const std::string& precision) {
  Config cfg;  // defaults are the reference: d 256, 4 layers, 4 heads, vocab 4096, seq 256
  cfg.moe.enabled = moe;  // 4 experts of width 512, top-2; dense d_ff 1024
  cfg.train.precision = precision;
  return cfg;
}

double step_flops(const Config& cfg, int64_t tokens) {
  const auto counts = count_params(cfg);
  const double matmul_params = static_cast<double>(
      counts.active - counts.embedding + (cfg.model.tie_embeddings ? counts.embedding : 0));
  const auto& m = cfg.model;
  return 6.0 * matmul_params * tokens + 12.0 * m.n_layers * m.seq_len * m.d_model * tokens;
}

void bench(bool moe, const std::string& precision, int steps, const torch::Device& device,
           double peak) {
  const Config cfg = reference_config(moe, precision);
  const int64_t batch = 16, seq = cfg.model.seq_len, tokens = batch * seq;
  Transformer model(cfg);
  model->to(device);
  const auto ids = torch::TensorOptions(torch::kLong).device(device);
  const auto input = torch::randint(0, cfg.model.vocab_size, {batch, seq}, ids);
  const auto targets = torch::randint(0, cfg.model.vocab_size, {batch, seq}, ids);
  // GPU kernels run asynchronously: each timed phase ends when its kernels have.
  const auto wait = [&] {
    if (device.is_cuda()) torch::cuda::synchronize();
  };

  double forward_s = 0, loss_s = 0, backward_s = 0;
  auto step = [&](bool timed) {
    for (auto& p : model->parameters()) p.mutable_grad() = torch::Tensor();
    PhaseTimer::enable(timed);
    auto t0 = Clock::now();
    const auto out = model->forward(input);
    wait();
    const double f = seconds_since(t0);
    t0 = Clock::now();
    const auto loss = lm_loss(out.logits, targets) + out.aux_loss + out.z_loss;
    wait();
    const double l = seconds_since(t0);
    t0 = Clock::now();
    loss.backward();
    wait();
    const double b = seconds_since(t0);
    PhaseTimer::enable(false);
    if (timed) {
      forward_s += f;
      loss_s += l;
      backward_s += b;
    }
  };
  step(false);  // warm-up: allocator, oneDNN kernels
  PhaseTimer::reset();
  for (int i = 0; i < steps; ++i) step(true);

  const double step_s = (forward_s + loss_s + backward_s) / steps;
  const double mfu = step_flops(cfg, tokens) / step_s / peak;
  const std::string ran = resolve_precision(precision, device).precision;
  const std::string label = precision == ran ? precision : precision + ":" + ran;
  fmt::print("{:<6} {:<9} {:>9.0f} tok/s  {:>6.3f} s/step  MFU {:>5.1f}%  ({:.1f} GFLOP/step)\n",
             moe ? "moe" : "dense", label, tokens / step_s, step_s, 100 * mfu,
             step_flops(cfg, tokens) / 1e9);
  std::string phases;
  for (int p = 0; p < static_cast<int>(Phase::kCount); ++p) {
    const double s = PhaseTimer::seconds(static_cast<Phase>(p)) / steps;
    if (s > 0) phases += fmt::format(" {}={:.0f}", phase_name(static_cast<Phase>(p)), 1e3 * s);
  }
  fmt::print("    ms/step: forward={:.0f} [{} ] loss={:.0f} backward={:.0f}\n",
             1e3 * forward_s / steps, phases, 1e3 * loss_s / steps, 1e3 * backward_s / steps);
}

}  // namespace
}  // namespace moelab

int main(int argc, char** argv) {
  moelab::keep_freed_memory();
  const int steps = argc > 1 ? std::stoi(argv[1]) : 3;
  const int threads = argc > 2 ? std::stoi(argv[2]) : 2;
  const torch::Device device(argc > 3 ? argv[3] : "cpu");
  torch::set_num_threads(threads);
  torch::manual_seed(0);
  const auto auto_choice = moelab::resolve_precision("auto", device);
  const double peak_fp32 = moelab::matmul_peak_flops(torch::kFloat32, threads, device);
  const double peak_bf16 = moelab::matmul_peak_flops(torch::kBFloat16, threads, device);
  fmt::print(
      "torch {}  device {}  threads {}  matmul peak: fp32 {:.1f} GFLOP/s, bf16 {:.1f} "
      "GFLOP/s\nprecision auto -> {} ({})\n",
      TORCH_VERSION, device.str(), threads, peak_fp32 / 1e9, peak_bf16 / 1e9, auto_choice.precision,
      auto_choice.reason);
  const double peak_auto = auto_choice.precision == "bf16" ? peak_bf16 : peak_fp32;
  for (bool moe : {false, true}) {
    moelab::bench(moe, "fp32", steps, device, peak_fp32);
    moelab::bench(moe, "auto", steps, device, peak_auto);
  }
  fmt::print("peak resident memory {:.0f} MiB\n", moelab::peak_resident_mib());
  return 0;
}
