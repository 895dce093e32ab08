// Training-step throughput: forward, loss, backward and the AdamW update of the
// reference model (d 256, 4 layers, 4 heads, vocab 4096, seq 256, batch 16,
// untied head), as tokens/s and MFU against the matmul peak measured here in the
// precision the step ran in. The step is the one bench/peers.sh compares with
// the plain PyTorch peer, which times the same four parts.
//
// FLOPs per token: model_flops_per_token (config/param_count.h): 6 x active non-embedding
// parameters (the head included) + 12 x n_layers x seq_len x d_model.
//
// bench_model                      dense (d_ff 1024) and MoE (4 x 512, top-2), fp32 and auto
// bench_model --experts 64 --top-k 8 --ffn 64 --precision auto     one shape, one precision
// bench_model --device cuda        on the current GPU, MFU against its measured bf16 peak
// bench_model --batch 128          128 sequences per step instead of 16
// bench_model --d-model 128 --vocab 1024 --seq 128    configs/moe-small.toml's model
// bench_model --profile 25         also the 25 operators with the most self time per step
// bench_model --experts 4 --top-k 2 --ffn 256 --in-turn-with 64:8:64   two shapes, steps in turn
// bench_model --set model.attention=mla --set model.kv_lora_rank=64 ...   any config key
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/torch.h>
#include <torch/version.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "comm/local_communicator.h"
#include "config/load.h"
#include "config/param_count.h"
#include "model/phase_timer.h"
#include "model/precision.h"
#include "model/transformer.h"
#include "train/expert_gemm_choice.h"
#include "train/optimizer.h"
#include "util/allocator.h"
#include "util/error.h"
#include "util/matmul_peak.h"
#include "util/median.h"
#include "util/memory.h"
#include "util/peak_memory.h"
#include "util/stopwatch.h"

namespace moelab {
namespace {

struct Shape {
  int64_t experts = 0;  // 0 = dense
  int64_t top_k = 2;
  int64_t ffn = 1024;  // dense d_ff, or the width of one expert
};

// The model around the feed-forward shape; Config's defaults are the reference.
struct Dims {
  int64_t d_model = Config().model.d_model;
  int64_t layers = Config().model.n_layers;
  int64_t heads = Config().model.n_heads;
  int64_t vocab = Config().model.vocab_size;
  int64_t seq = Config().model.seq_len;
};

Config bench_config(const Shape& shape, const Dims& dims, const std::string& precision,
                    ExpertGemm expert_gemm, const std::vector<std::string>& overrides) {
  Config cfg;
  cfg.model.d_model = dims.d_model;
  cfg.model.n_layers = dims.layers;
  cfg.model.n_heads = dims.heads;
  cfg.model.vocab_size = dims.vocab;
  cfg.model.seq_len = dims.seq;
  cfg.moe.enabled = shape.experts > 0;
  if (cfg.moe.enabled) {
    cfg.moe.num_experts = shape.experts;
    cfg.moe.top_k = shape.top_k;
    cfg.moe.d_expert = shape.ffn;
  } else {
    cfg.model.d_ff = shape.ffn;
  }
  cfg.train.precision = *parse_choice<Precision>(precision);
  cfg.train.expert_gemm = expert_gemm;
  for (const auto& assignment : overrides) apply_override(cfg, assignment);
  validate(cfg, 1);
  return cfg;
}

std::string shape_name(const Shape& shape) {
  if (shape.experts == 0) return fmt::format("dense ff{}", shape.ffn);
  return fmt::format("moe {}x{} top{}", shape.experts, shape.ffn, shape.top_k);
}

namespace profiler = torch::autograd::profiler;

// Self time (own time minus that of the operators it called) per operator name:
// where a step goes below the phases, e.g. which element-wise kernels a fused one
// would replace. Events nest per thread; the autograd engine runs CPU backward
// ops on the calling thread, so forward and backward are both seen.
void print_op_profile(const std::vector<profiler::KinetoEvent>& events, int steps, int top) {
  std::vector<const profiler::KinetoEvent*> sorted;
  for (const auto& e : events) sorted.push_back(&e);
  std::sort(sorted.begin(), sorted.end(), [](const auto* a, const auto* b) {
    if (a->startThreadId() != b->startThreadId()) return a->startThreadId() < b->startThreadId();
    if (a->startNs() != b->startNs()) return a->startNs() < b->startNs();
    return a->endNs() > b->endNs();  // a parent before the child that starts with it
  });
  std::map<std::string, std::pair<double, int64_t>> self;  // name -> (ns, calls)
  std::vector<const profiler::KinetoEvent*> open;
  for (const auto* e : sorted) {
    while (!open.empty() && (open.back()->startThreadId() != e->startThreadId() ||
                             open.back()->endNs() <= e->startNs())) {
      open.pop_back();
    }
    auto& mine = self[e->name()];
    mine.first += static_cast<double>(e->durationNs());
    mine.second += 1;
    if (!open.empty()) self[open.back()->name()].first -= static_cast<double>(e->durationNs());
    open.push_back(e);
  }
  std::vector<std::pair<std::string, std::pair<double, int64_t>>> rows(self.begin(), self.end());
  std::sort(rows.begin(), rows.end(),
            [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
  fmt::print("    self ms/step  calls/step  operator\n");
  for (int i = 0; i < std::min<int>(top, static_cast<int>(rows.size())); ++i) {
    fmt::print("    {:>12.2f}  {:>10.0f}  {}\n", rows[i].second.first / 1e6 / steps,
               static_cast<double>(rows[i].second.second) / steps, rows[i].first);
  }
}

// The experts' GEMM path as the trainer chooses it at one rank (measured, or
// forced by --expert-gemm), printed with its reason.
void choose_path(const Config& cfg, TransformerImpl& model, int64_t tokens,
                 const torch::Device& device) {
  const auto dtype = resolve_precision(cfg.train.precision, device).dtype();
  LocalCommunicator one_rank;
  const auto choice =
      choose_expert_gemm(cfg, model, expert_shape(cfg, 1, dtype, device),
                         balanced_rows_per_expert(cfg, tokens, 1), std::nullopt, one_rank);
  if (choice.path != ExpertGemm::kAuto) {
    fmt::print("    experts' GEMMs: {} ({})\n", choice_name(choice.path), choice.reason);
  }
}

// One shape's model, AdamW state and batch, stepped when asked: several runs
// can take their steps in turn in one process. Each timed step's parts and
// forward phases add to the run's own sums.
class ShapeRun {
 public:
  ShapeRun(const Config& cfg, const Shape& shape, int64_t batch, const torch::Device& device)
      : cfg_(cfg),
        shape_(shape),
        device_(device),
        tokens_(batch * cfg.model.seq_len),
        model_(model_settings(cfg)) {
    model_->to(device);
    choose_path(cfg, *model_, tokens_, device);
    NamedParams params;
    for (auto& np : model_->named_parameters()) params.emplace_back(np.key(), np.value());
    optimizer_ = make_adamw(params, cfg.optim);
    const auto ids = torch::TensorOptions(torch::kLong).device(device);
    input_ = torch::randint(0, cfg.model.vocab_size, {batch, cfg.model.seq_len}, ids);
    targets_ = torch::randint(0, cfg.model.vocab_size, {batch, cfg.model.seq_len}, ids);
  }

  // One training step; the seconds it took. An untimed one warms the
  // allocator, oneDNN's kernels and the optimizer state.
  double step(bool timed) {
    optimizer_->zero_grad();
    PhaseTimer::reset();
    PhaseTimer::enable(timed);
    double part[4];
    Stopwatch watch;
    const auto out = model_->forward(input_, targets_);  // the head's phase holds the fused loss
    part[0] = lap(watch);
    const auto loss = out.lm_loss + out.aux_loss + out.z_loss;
    part[1] = lap(watch);
    loss.backward();
    part[2] = lap(watch);
    optimizer_->step();
    part[3] = lap(watch);
    PhaseTimer::enable(false);
    const double total = part[0] + part[1] + part[2] + part[3];
    if (!timed) return total;
    ++timed_steps_;
    for (int i = 0; i < 4; ++i) seconds_[i] += part[i];
    for (int p = 0; p < static_cast<int>(Phase::kCount); ++p) {
      phase_seconds_[p] += PhaseTimer::seconds(static_cast<Phase>(p));
    }
    return total;
  }

  // Tokens/s, MFU against `peak` and the phases per step, over the timed steps.
  void report(const std::string& precision, double peak, PeakMemory& peak_memory) const {
    const double steps = timed_steps_;
    const double step_s = (seconds_[0] + seconds_[1] + seconds_[2] + seconds_[3]) / steps;
    const double flops = model_flops_per_token(cfg_) * tokens_;
    const std::string ran = choice_name(resolve_precision(cfg_.train.precision, device_).precision);
    const std::string label = precision == ran ? precision : precision + ":" + ran;
    fmt::print(
        "{:<18} {:<9} {:>9.0f} tok/s  {:>6.3f} s/step  MFU {:>5.1f}%  ({:.1f} GFLOP/step, "
        "{:.3f}M params, peak {:.0f} MiB)\n",
        shape_name(shape_), label, tokens_ / step_s, step_s, 100 * flops / step_s / peak,
        flops / 1e9, count_params(cfg_).total / 1e6, peak_memory.peak_mib());
    std::string phases;
    for (int p = 0; p < static_cast<int>(Phase::kCount); ++p) {
      const double s = phase_seconds_[p] / steps;
      if (s > 0) phases += fmt::format(" {}={:.0f}", phase_name(static_cast<Phase>(p)), 1e3 * s);
    }
    fmt::print("    ms/step: forward={:.0f} [{} ] loss={:.0f} backward={:.0f} optimizer={:.0f}\n",
               1e3 * seconds_[0] / steps, phases, 1e3 * seconds_[1] / steps,
               1e3 * seconds_[2] / steps, 1e3 * seconds_[3] / steps);
  }

 private:
  // GPU kernels run asynchronously: each timed part ends when its kernels have.
  double lap(Stopwatch& watch) const {
    if (device_.is_cuda()) torch::cuda::synchronize();
    return watch.lap() / 1e3;
  }

  Config cfg_;
  Shape shape_;
  torch::Device device_;
  int64_t tokens_;
  Transformer model_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  torch::Tensor input_, targets_;
  int timed_steps_ = 0;
  double seconds_[4] = {0, 0, 0, 0};  // forward, loss, backward, optimizer
  double phase_seconds_[static_cast<int>(Phase::kCount)] = {};
};

// One shape, one precision: two warm-up steps, then `steps` timed ones.
// `precision`: as requested (the label says what "auto" ran).
void bench(const Config& cfg, const Shape& shape, const std::string& precision, int steps,
           int64_t batch, const torch::Device& device, double peak, int profile_top) {
  PeakMemory peak_memory(device);  // the device's allocator on CUDA, the resident set on a CPU
  peak_memory.reset();
  ShapeRun run(cfg, shape, batch, device);
  run.step(false);
  run.step(false);
  if (profile_top > 0) {
    const torch::profiler::impl::ProfilerConfig config(
        torch::profiler::impl::ProfilerState::KINETO);
    const std::set<torch::profiler::impl::ActivityType> cpu = {
        torch::profiler::impl::ActivityType::CPU};
    profiler::prepareProfiler(config, cpu);  // Kineto must be set up before it starts
    profiler::enableProfiler(config, cpu);
  }
  for (int i = 0; i < steps; ++i) run.step(true);
  std::unique_ptr<profiler::ProfilerResult> profile;
  if (profile_top > 0) profile = profiler::disableProfiler();
  run.report(precision, peak, peak_memory);
  if (profile) print_op_profile(profile->events(), steps, profile_top);
}

// Two shapes in one precision, their timed steps in turn (the first shape's
// first in odd rounds, the second's in even ones): a CPU whose speed drifts
// from one run to the next (another tenant, the clock) slows both alike, so
// their ratio holds where two separate runs' would not. Prints both rows, then
// the second's tokens/s over the first's: the median of the rounds' ratios,
// their range, and the ratio of the totals.
void bench_in_turn(const Config& first_cfg, const Shape& first, const Config& second_cfg,
                   const Shape& second, const std::string& precision, int steps, int64_t batch,
                   const torch::Device& device, double peak) {
  PeakMemory peak_memory(device);  // both models' together
  peak_memory.reset();
  ShapeRun a(first_cfg, first, batch, device), b(second_cfg, second, batch, device);
  for (ShapeRun* run : {&a, &b}) {
    run->step(false);
    run->step(false);
  }
  std::vector<double> ratios;  // a's seconds over b's: b's tokens/s over a's
  double a_total = 0, b_total = 0;
  for (int i = 0; i < steps; ++i) {
    double a_s, b_s;
    if (i % 2 == 0) {
      a_s = a.step(true);
      b_s = b.step(true);
    } else {
      b_s = b.step(true);
      a_s = a.step(true);
    }
    ratios.push_back(a_s / b_s);
    a_total += a_s;
    b_total += b_s;
  }
  a.report(precision, peak, peak_memory);
  b.report(precision, peak, peak_memory);
  const auto [low, high] = std::minmax_element(ratios.begin(), ratios.end());
  fmt::print(
      "in turn: {} / {} tok/s {:.3f} (median of {} rounds, range {:.3f}-{:.3f}; totals {:.3f})\n",
      shape_name(second), shape_name(first), median(ratios), steps, *low, *high, a_total / b_total);
}

// "experts:top-k:ffn", e.g. 64:8:64.
Shape parse_shape(const std::string& text) {
  Shape shape;
  char colon1 = 0, colon2 = 0;
  std::istringstream in(text);
  in >> shape.experts >> colon1 >> shape.top_k >> colon2 >> shape.ffn;
  if (!in || !in.eof() || colon1 != ':' || colon2 != ':' || shape.experts < 0 || shape.top_k < 1 ||
      shape.ffn < 1) {
    throw InputError("--in-turn-with: expected experts:top-k:ffn (e.g. 64:8:64), got \"" + text +
                     "\"");
  }
  return shape;
}

// --in-turn-with's shape, if given (--profile times one shape alone).
std::optional<Shape> second_shape(const std::string& in_turn_with, int profile_top) {
  if (in_turn_with.empty()) return std::nullopt;
  if (profile_top > 0) throw InputError("--profile times one shape: leave out --in-turn-with");
  return parse_shape(in_turn_with);
}

// Bad input: exit 2, saying what.
int refused(const InputError& e) {
  fmt::print(stderr, "bench_model: {}\n", e.what());
  return 2;
}

}  // namespace
}  // namespace moelab

int main(int argc, char** argv) {
  moelab::keep_freed_memory();
  CLI::App app{"moelab training-step benchmark"};
  int steps = 5, threads = 2, profile_top = 0;
  int64_t batch = 16;
  std::string device_name = "cpu";
  std::vector<std::string> precisions = {"fp32", "auto"};
  std::string expert_gemm = "auto";
  moelab::Shape one;
  moelab::Dims dims;
  std::vector<std::string> overrides;
  app.add_option("--steps", steps, "timed steps (after two warm-up steps)")
      ->check(CLI::PositiveNumber);
  app.add_option("--threads", threads, "intra-op threads")->check(CLI::PositiveNumber);
  app.add_option("--batch", batch, "sequences per step (the reference is 16; a GPU wants more)")
      ->check(CLI::PositiveNumber);
  app.add_option("--device", device_name, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--precision", precisions, "precisions to run")
      ->check(CLI::IsMember(moelab::choice_names<moelab::Precision>()))
      ->delimiter(',');
  app.add_option("--expert-gemm", expert_gemm, "the experts' GEMM path (train.expert_gemm)")
      ->check(CLI::IsMember(moelab::choice_names<moelab::ExpertGemm>()));
  auto* experts = app.add_option("--experts", one.experts, "one shape: experts (0 = dense)")
                      ->check(CLI::NonNegativeNumber);
  app.add_option("--top-k", one.top_k, "experts per token")->check(CLI::PositiveNumber);
  app.add_option("--ffn", one.ffn, "dense d_ff, or the width of one expert")
      ->check(CLI::PositiveNumber);
  app.add_option("--d-model", dims.d_model, "model width")->check(CLI::PositiveNumber);
  app.add_option("--layers", dims.layers, "transformer blocks")->check(CLI::PositiveNumber);
  app.add_option("--heads", dims.heads, "attention heads")->check(CLI::PositiveNumber);
  app.add_option("--vocab", dims.vocab, "vocabulary size")->check(CLI::PositiveNumber);
  app.add_option("--seq", dims.seq, "tokens per sequence")->check(CLI::PositiveNumber);
  app.add_option("--profile", profile_top,
                 "print the N operators with the most self time (the profiler slows the step)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--set", overrides, "a config key=value for every shape (repeatable)");
  std::string in_turn_with;
  app.add_option("--in-turn-with", in_turn_with,
                 "a second shape, experts:top-k:ffn (e.g. 64:8:64), whose steps alternate with "
                 "the one shape's; prints its tokens/s over the first's")
      ->needs(experts);
  CLI11_PARSE(app, argc, argv);
  std::optional<moelab::Shape> second;
  try {
    second = moelab::second_shape(in_turn_with, profile_top);
  } catch (const moelab::InputError& e) {
    return moelab::refused(e);
  }

  const torch::Device device(device_name);
  torch::set_num_threads(threads);
  torch::manual_seed(0);
  const auto auto_choice = moelab::resolve_precision(moelab::Precision::kAuto, device);
  const double peak_fp32 = moelab::matmul_peak_flops(torch::kFloat32, threads, device);
  const double peak_bf16 = moelab::matmul_peak_flops(torch::kBFloat16, threads, device);
  fmt::print(
      "torch {}  device {}  threads {}  matmul peak: fp32 {:.1f} GFLOP/s, bf16 {:.1f} "
      "GFLOP/s\nprecision auto -> {} ({})\nmodel: d {}, {} layers, {} heads, vocab {}, seq {}, "
      "batch {}\n",
      TORCH_VERSION, device.str(), threads, peak_fp32 / 1e9, peak_bf16 / 1e9,
      moelab::choice_name(auto_choice.precision), auto_choice.reason, dims.d_model, dims.layers,
      dims.heads, dims.vocab, dims.seq, batch);
  if (!overrides.empty()) fmt::print("config overrides: {}\n", fmt::join(overrides, " "));
  std::vector<moelab::Shape> shapes = {{0, 2, 1024}, {4, 2, 512}};
  if (*experts) shapes = {one};
  try {
    for (const auto& shape : shapes) {
      for (const auto& precision : precisions) {
        const auto requested = *moelab::parse_choice<moelab::Precision>(precision);
        const bool bf16 =
            moelab::resolve_precision(requested, device).precision == moelab::Precision::kBf16;
        const double peak = bf16 ? peak_bf16 : peak_fp32;
        const auto path = *moelab::parse_choice<moelab::ExpertGemm>(expert_gemm);
        const auto cfg = moelab::bench_config(shape, dims, precision, path, overrides);
        if (second) {
          moelab::bench_in_turn(cfg, shape,
                                moelab::bench_config(*second, dims, precision, path, overrides),
                                *second, precision, steps, batch, device, peak);
        } else {
          moelab::bench(cfg, shape, precision, steps, batch, device, peak, profile_top);
        }
      }
    }
  } catch (const moelab::InputError& e) {
    return moelab::refused(e);
  }
  fmt::print("peak resident memory {:.0f} MiB\n", moelab::peak_resident_mib());
  return 0;
}
