#include "train/trainer.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <vector>

#include "comm/cuda_device.h"
#include "comm/process_groups.h"
#include "config/load.h"
#include "data/batch_loader.h"
#include "data/validation_set.h"
#include "model/all_to_all_dispatcher.h"
#include "model/precision.h"
#include "model/transformer.h"
#include "train/evaluator.h"
#include "train/grad_clip.h"
#include "train/grad_sync.h"
#include "train/lr_schedule.h"
#include "train/metrics_log.h"
#include "train/mfu.h"
#include "train/nonfinite_guard.h"
#include "train/progress.h"
#include "train/run_checkpoint.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/memory.h"
#include "util/version.h"

namespace moelab {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double, std::milli>(to - from).count();
}

std::vector<torch::Tensor> tensors(const NamedParams& named) {
  std::vector<torch::Tensor> out;
  for (const auto& [name, p] : named) out.push_back(p);
  return out;
}

int64_t global_batch_seqs(const Config& cfg) {
  return cfg.train.batch_tokens > 0 ? cfg.train.batch_tokens / cfg.model.seq_len
                                    : cfg.train.batch_seqs;
}

MoeContext moe_context(const Config& cfg, const ProcessGroups& groups) {
  MoeContext ctx;
  if (!cfg.moe.enabled) return ctx;
  if (groups.ep_size > 1) {
    auto ep = groups.ep;
    const auto placement = groups.placement;
    ctx.make_dispatcher = [ep, placement](int64_t) {
      return std::make_shared<AllToAllDispatcher>(ep, placement);
    };
  }
  if (cfg.moe.stats == "global" && groups.dp->size() > 1) {
    auto dp = groups.dp;
    ctx.reduce_mean = [dp](const torch::Tensor& t) {
      auto sum = t.detach().clone();
      dp->all_reduce_sum(sum);
      return sum / double(dp->size());
    };
  }
  return ctx;
}

// config.resolved.toml (with the commit) and run.json, written by rank 0.
void write_run_files(const Config& cfg, const ProcessGroups& groups,
                     const PrecisionChoice& precision) {
  fs::create_directories(cfg.train.out_dir);
  write_file_durably(cfg.train.out_dir + "/config.resolved.toml",
                     "# moelab " + std::string(git_commit()) + ", resolved from " + cfg.source +
                         "\n" + to_toml(cfg));
  nlohmann::json run = {{"git_commit", git_commit()},
                        {"config_source", cfg.source},
                        {"world_size", groups.world->size()},
                        {"ep", groups.ep_size},
                        {"backend", groups.backend},
                        {"layout", groups.layout()},
                        {"threads_per_rank", torch::get_num_threads()},
                        {"precision", precision.precision},
                        {"precision_reason", precision.reason}};
  write_file_durably(cfg.train.out_dir + "/run.json", run.dump(2) + "\n");
}

// Per-layer router statistics averaged over ranks, for metrics.jsonl.
nlohmann::json moe_metrics(const std::vector<MoeLayerStats>& stats, Communicator& world) {
  if (stats.empty()) return nullptr;
  std::vector<torch::Tensor> parts;
  for (const auto& s : stats) {
    parts.push_back(s.load.to(torch::kCPU, torch::kDouble));
    parts.push_back(
        torch::stack({s.drop_fraction, s.router_entropy}).to(torch::kCPU, torch::kDouble));
  }
  auto flat = torch::cat(parts);
  world.all_reduce_sum(flat);
  flat /= double(world.size());
  nlohmann::json load_ratio = nlohmann::json::array(), drop = nlohmann::json::array(),
                 entropy = nlohmann::json::array();
  int64_t offset = 0;
  for (const auto& s : stats) {
    auto load = flat.narrow(0, offset, s.load.numel());
    load_ratio.push_back((load.max() / load.mean()).item<double>());
    drop.push_back(flat[offset + s.load.numel()].item<double>());
    entropy.push_back(flat[offset + s.load.numel() + 1].item<double>());
    offset += s.load.numel() + 2;
  }
  return {{"expert_load_max_over_mean", load_ratio},
          {"drop_fraction", drop},
          {"router_entropy", entropy}};
}

}  // namespace

TrainSummary run_training(const Config& cfg) {
  const auto started = Clock::now();
  ProcessGroups groups = make_process_groups(cfg);
  Communicator& world = *groups.control;
  const int rank = world.rank();
  const int world_size = world.size();
  if (cfg.train.threads > 0) torch::set_num_threads(int(cfg.train.threads));
  const torch::Device device = run_device(cfg);
  const PrecisionChoice precision = resolve_precision(cfg.train.precision, device);
  if (rank == 0) {
    spdlog::info("layout: {}", groups.layout());
    spdlog::info("device {}, precision {} ({})", device.str(), precision.precision,
                 precision.reason);
  }

  const int64_t batch_seqs = global_batch_seqs(cfg);
  BatchLoader loader(cfg.data.dir, cfg.data.train_split, cfg.model.seq_len, batch_seqs, rank,
                     world_size, uint64_t(cfg.train.seed), int(cfg.data.prefetch),
                     cfg.data.max_unique_tokens);
  ValidationSet val(cfg.data.dir, cfg.data.val_split, cfg.model.seq_len, cfg.eval.max_windows);
  check_vocab_matches(loader.info(), cfg.model.vocab_size);
  check_same_tokenizer(loader.info(), val.info());

  const int64_t local_seqs = batch_seqs / world_size;
  const int64_t micro_seqs = cfg.train.micro_batch_seqs > 0
                                 ? std::min(cfg.train.micro_batch_seqs, local_seqs)
                                 : local_seqs;
  if (local_seqs % micro_seqs != 0) {
    throw InputError(cfg.source + ": train.micro_batch_seqs = " + std::to_string(micro_seqs) +
                     " must divide the per-rank batch of " + std::to_string(local_seqs) +
                     " sequences");
  }

  Transformer model(cfg, moe_context(cfg, groups));
  model->to(device);
  NamedParams replicated, experts, all;
  for (auto& np : model->named_parameters()) {
    (model->is_expert_parameter(np.key()) ? experts : replicated)
        .emplace_back(np.key(), np.value());
    all.emplace_back(np.key(), np.value());
  }
  NamedParams buffers;
  for (auto& nb : model->named_buffers()) buffers.emplace_back(nb.key(), nb.value());
  auto optimizer = make_adamw(all, cfg.optim);
  GradSync replicated_sync(tensors(replicated), groups.dp, world_size);
  GradSync expert_sync(tensors(experts), groups.expert_dp, world_size);
  const auto all_tensors = tensors(all);

  TrainState state;
  int64_t resumed_step = -1;  // -1: a fresh run starts its logs anew
  if (auto resumed = restore_run_checkpoint(cfg, groups, all, buffers, *optimizer)) {
    state = *resumed;
    resumed_step = state.step;
    loader.restore(state.loader);
  } else if (!cfg.train.init_from.empty()) {
    load_initial_weights(cfg.train.init_from, all, buffers);
  }
  NonfiniteGuard guard(cfg.train.max_nonfinite_steps);
  guard.restore(state.nonfinite_total, state.nonfinite_in_a_row);

  std::unique_ptr<MetricsLog> metrics;
  std::unique_ptr<ValLog> val_log;
  std::unique_ptr<Progress> progress;
  double peak_flops = 0;
  const double flops_per_token = model_flops_per_token(cfg);
  if (rank == 0) {
    write_run_files(cfg, groups, precision);
    metrics = std::make_unique<MetricsLog>(cfg.train.out_dir, resumed_step);
    val_log = std::make_unique<ValLog>(cfg.train.out_dir, resumed_step);
    progress = std::make_unique<Progress>(cfg.train.max_steps, cfg.log.progress);
    const auto dtype = precision.precision == "bf16" ? torch::kBFloat16 : torch::kFloat;
    peak_flops = matmul_peak_flops(dtype, torch::get_num_threads(), device);
    if (dtype == torch::kBFloat16 && !bf16_is_native(device)) {
      const double fp32 = matmul_peak_flops(torch::kFloat, torch::get_num_threads(), device);
      spdlog::warn(
          "train.precision = \"bf16\" on a CPU without native bf16 matmul (no amx_bf16 or "
          "avx512_bf16 flag): measured {:.1f} GFLOP/s in bf16 against {:.1f} in fp32, {:.0f}x "
          "slower; \"auto\" trains in fp32 here",
          peak_flops / 1e9, fp32 / 1e9, fp32 / peak_flops);
    }
  }

  auto run_eval = [&] {
    EvalResult r = evaluate(model, val, cfg.eval.batch_seqs, groups.dp.get(), device);
    state.best_val_loss = std::min(state.best_val_loss, r.loss);
    if (rank == 0) {
      val_log->write(state.step, state.tokens, r.loss);
      spdlog::info("step {} val_loss {:.4f} (best {:.4f})", state.step, r.loss,
                   state.best_val_loss);
    }
    return r.loss;
  };

  TrainSummary summary;
  const int64_t tokens_per_step = batch_seqs * cfg.model.seq_len;
  if (state.step == 0) summary.last_val_loss = run_eval();  // the curve starts at initialisation

  while (state.step < cfg.train.max_steps) {
    const auto t0 = Clock::now();
    const double lr = lr_at(state.step + 1, cfg.train.max_steps,
                            cfg.optim);  // the update about to be applied, counted from 1
    set_lr(*optimizer, lr);
    optimizer->zero_grad();

    torch::Tensor batch = loader.next().to(device);
    const auto t_data = Clock::now();
    // Losses stay on the device; the step reads values back once, below.
    torch::Tensor lm_sum, aux_sum, z_sum;
    std::vector<MoeLayerStats> stats;
    for (int64_t m = 0; m < local_seqs; m += micro_seqs) {
      auto chunk = batch.narrow(0, m, micro_seqs);
      auto inputs = chunk.narrow(1, 0, cfg.model.seq_len);
      auto targets = chunk.narrow(1, 1, cfg.model.seq_len);
      ModelOutput out = model->forward(inputs, targets);
      const auto& lm = out.lm_loss;
      const double weight = double(micro_seqs) / double(local_seqs);
      ((lm + out.aux_loss + out.z_loss) * weight).backward();
      const auto accumulate = [weight](torch::Tensor& sum, const torch::Tensor& value) {
        const auto weighted = value.detach().to(torch::kDouble) * weight;
        sum = sum.defined() ? sum + weighted : weighted;
      };
      accumulate(lm_sum, lm);
      accumulate(aux_sum, out.aux_loss);
      accumulate(z_sum, out.z_loss);
      stats = std::move(out.moe_stats);
    }
    const auto t_compute = Clock::now();
    replicated_sync.sync();
    expert_sync.sync();

    // Replicated gradients are identical everywhere after the sync; the experts
    // of one expert-parallel group are disjoint, so their norms add over it.
    auto expert_sq = local_grad_sq_norm_tensor(expert_sync.params(), device);
    if (groups.ep_size > 1) groups.ep->all_reduce_sum(expert_sq);
    const auto host =
        torch::stack({lm_sum, aux_sum, z_sum,
                      local_grad_sq_norm_tensor(replicated_sync.params(), device), expert_sq})
            .cpu();
    const double grad_norm = std::sqrt(host[3].item<double>() + host[4].item<double>());
    auto losses = host.narrow(0, 0, 3).clone();
    world.all_reduce_sum(losses);
    losses /= double(world_size);
    const double loss = losses[0].item<double>();

    // Every rank sees the same reduced loss and norm, so all skip together.
    const bool skip = guard.should_skip(std::isfinite(grad_norm) ? loss : NAN);
    const auto t_sync = Clock::now();
    if (!skip) {
      if (cfg.optim.grad_clip > 0 && grad_norm > cfg.optim.grad_clip) {
        scale_grads(all_tensors, cfg.optim.grad_clip / (grad_norm + 1e-6));
      }
      optimizer->step();
    }
    model->update_balance_biases(/*apply=*/!skip);
    if (skip && rank == 0) {
      spdlog::warn("step {}: non-finite loss or gradient, update skipped ({} in a row)", state.step,
                   guard.consecutive());
    }
    state.step += 1;
    state.tokens += tokens_per_step;
    state.loader = loader.state();
    state.nonfinite_total = guard.total();
    state.nonfinite_in_a_row = guard.consecutive();
    const auto t_end = Clock::now();
    // Where rank 0's step went; on more ranks, a rank waiting for a slower one
    // waits inside the dispatch exchange (forward_backward) or in grad_sync.
    const nlohmann::json time_ms = {{"data", ms_between(t0, t_data)},
                                    {"forward_backward", ms_between(t_data, t_compute)},
                                    {"grad_sync", ms_between(t_compute, t_sync)},
                                    {"optimizer", ms_between(t_sync, t_end)}};
    const double seconds = ms_between(t0, t_end) / 1000.0;
    const double tokens_per_s = double(tokens_per_step) / seconds;

    const bool log_now = state.step % cfg.log.interval == 0 || state.step == cfg.train.max_steps;
    nlohmann::json moe = log_now ? moe_metrics(stats, world) : nullptr;
    if (rank == 0) {
      progress->update(state.step, loss, tokens_per_s, lr);
      if (log_now) {
        nlohmann::json line = {{"step", state.step},
                               {"tokens", state.tokens},
                               {"epoch", state.loader.epoch},
                               {"lr", lr},
                               {"loss", loss},
                               {"aux_loss", losses[1].item<double>()},
                               {"z_loss", losses[2].item<double>()},
                               {"grad_norm", grad_norm},
                               {"tokens_per_s", tokens_per_s},
                               {"mfu", flops_per_token * tokens_per_s / (peak_flops * world_size)},
                               {"time_ms", time_ms},
                               {"skipped", skip},
                               {"nonfinite_total", state.nonfinite_total}};
        if (!moe.is_null()) line["moe"] = moe;
        metrics->write(line);
      }
    }
    if (guard.exhausted()) {
      summary.stopped_nonfinite = true;
      spdlog::error("stopping: {} non-finite losses in a row (train.max_nonfinite_steps)",
                    guard.consecutive());
      break;
    }
    const bool last = state.step == cfg.train.max_steps;
    if ((cfg.eval.interval > 0 && state.step % cfg.eval.interval == 0) || last) {
      summary.last_val_loss = run_eval();
    }
    if ((cfg.checkpoint.interval > 0 && state.step % cfg.checkpoint.interval == 0) || last) {
      save_run_checkpoint(cfg, groups, replicated, experts, buffers, *optimizer, state);
    }
  }
  if (rank == 0) progress->finish();

  summary.steps = state.step;
  summary.tokens = state.tokens;
  summary.best_val_loss = state.best_val_loss;
  summary.nonfinite_steps = state.nonfinite_total;
  // Peak memory per rank: expert weights and their optimizer state shrink with ep.
  auto peak_mib = world.all_gather(torch::tensor({peak_resident_mib()}, torch::kDouble));
  const std::vector<double> peak_per_rank(peak_mib.data_ptr<double>(),
                                          peak_mib.data_ptr<double>() + peak_mib.numel());
  if (rank == 0)
    spdlog::info("peak resident memory per rank (MiB): {:.0f}", fmt::join(peak_per_rank, " "));
  if (rank == 0 && !summary.stopped_nonfinite) {
    nlohmann::json done = {
        {"steps", summary.steps},
        {"tokens", summary.tokens},
        {"best_val_loss", summary.best_val_loss},
        {"final_val_loss", summary.last_val_loss},
        {"nonfinite_steps", summary.nonfinite_steps},
        {"wall_seconds", std::chrono::duration<double>(Clock::now() - started).count()},
        {"peak_resident_mib", peak_per_rank}};
    write_file_durably(cfg.train.out_dir + "/DONE", done.dump(2) + "\n");
  }
  return summary;
}

}  // namespace moelab
