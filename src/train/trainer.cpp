#include "train/trainer.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cmath>
#include <optional>
#include <thread>

#include "comm/cuda_device.h"
#include "config/data_sets.h"
#include "config/param_count.h"
#include "config/warnings.h"
#include "metrics/run_log.h"
#include "metrics/step_phases.h"
#include "train/evaluator.h"
#include "train/expert_gemm_choice.h"
#include "train/initial_weights.h"
#include "train/optimizer.h"
#include "util/error.h"
#include "util/matmul_peak.h"
#include "util/memory.h"
#include "util/mpi_session.h"
#include "util/test_hooks.h"

namespace moelab {
namespace {

int64_t global_batch_seqs(const Config& cfg) {
  return cfg.train.batch_tokens > 0 ? cfg.train.batch_tokens / cfg.model.seq_len
                                    : cfg.train.batch_seqs;
}

// Adds value * weight (in double, detached) to `sum`.
void accumulate(torch::Tensor& sum, const torch::Tensor& value, double weight) {
  const auto weighted = value.detach().to(torch::kDouble) * weight;
  sum = sum.defined() ? sum + weighted : weighted;
}

// The weighted MTP loss (added to the loss) and each depth's cross-entropy,
// mtp_ce/depth_<k> in TensorBoard.
void add_mtp_metrics(double mtp_loss, const std::vector<double>& mtp_ce, nlohmann::json& line) {
  line["mtp_loss"] = mtp_loss;
  nlohmann::json per_depth;
  for (size_t k = 0; k < mtp_ce.size(); ++k)
    per_depth["depth_" + std::to_string(k + 1)] = mtp_ce[k];
  line["mtp_ce"] = per_depth;
}

bool every(int64_t interval, int64_t step) {
  return interval > 0 && step % interval == 0;
}

WatchdogOptions watchdog_options(const Config& cfg) {
  WatchdogOptions options;
  options.timeout_s = cfg.parallel.timeout_s;
  options.checkpoint_timeout_s = cfg.parallel.checkpoint_timeout_s;
  options.phase_timeout_s = cfg.parallel.phase_timeout_s;
  options.rank = MpiSession::rank();
  options.world_size = MpiSession::size();
  return options;
}

// Tests only: the rates of a CPU whose bf16 matmuls run this rank's
// test_hooks().bf16_speedup times its fp32 ones.
MatmulRates hooked_matmul_rates() {
  return {test_hooks().bf16_speedup.at(MpiSession::rank()) * 1e11, 1e11, torch::get_num_threads()};
}

// The CPU "auto" weighs bf16 on, as this rank sees it: its own features and
// measured rates, or (tests only) a native bf16 CPU at the hook's speedup.
struct RankCpu {
  CpuFeatures features;
  MatmulRates (*rates)();
};

RankCpu rank_cpu() {
  if (test_hooks().bf16_speedup.count(MpiSession::rank()) == 0) {
    return {cpu_features(), cpu_matmul_rates};
  }
  CpuFeatures native_bf16;
  native_bf16.avx512_bf16 = true;
  return {native_bf16, hooked_matmul_rates};
}

// Sets train.threads, then resolves the run's precision: "auto" weighs bf16
// against fp32 at the threads the run trains on (they need not scale alike).
PrecisionChoice precision_at_train_threads(const Config& cfg, const torch::Device& device,
                                           Communicator& control) {
  if (cfg.train.threads > 0) torch::set_num_threads(int(cfg.train.threads));
  const RankCpu cpu = rank_cpu();
  return agreed_precision(cfg.train.precision, device, control, cpu.features, cpu.rates);
}

}  // namespace

Trainer::Trainer(const Config& cfg)
    : cfg_(cfg),
      watchdog_(watchdog_options(cfg)),
      plan_(make_process_groups(cfg), cfg),
      run_lock_(std::make_shared<RunLock>(cfg.train.out_dir, plan_.control(),
                                          heartbeat_period_s(cfg.parallel.timeout_s))),
      rank_(plan_.control().rank()),
      world_size_(plan_.control().size()),
      device_(run_device(cfg)),
      precision_(precision_at_train_threads(cfg, device_, plan_.control())),
      schedule_(cfg.optim, cfg.train.max_steps),
      guard_(cfg.train.max_nonfinite_steps),
      peak_memory_(device_),
      profiler_(cfg, rank_, device_) {
  watchdog_.start_heartbeats(cfg_.train.out_dir + "/heartbeats",
                             [lock = run_lock_] { lock->refresh(); });
  if (rank_ == 0) {
    spdlog::info("layout: {}", plan_.groups().layout());
  }
  const nlohmann::json places = rank_places(plan_.control());
  setup_data();
  setup_model();
  resume_or_init();
  keep_resumed_precision();
  choose_expert_gemm();
  if (rank_ == 0) open_logs(places);
}

Trainer::~Trainer() = default;

void Trainer::setup_data() {
  batch_seqs_ = global_batch_seqs(cfg_);
  std::vector<LoaderSource> sources;
  for (const auto& s : training_sources(cfg_)) {
    sources.push_back({s.dir, s.weight, s.max_unique_tokens});
    source_names_.push_back(s.name);
  }
  loader_ = std::make_unique<BatchLoader>(sources, cfg_.data.train_split, cfg_.model.seq_len,
                                          batch_seqs_, rank_, world_size_,
                                          uint64_t(cfg_.train.seed), int(cfg_.data.prefetch));
  check_vocab_matches(loader_->info(), cfg_.model.vocab_size);
  for (const auto& set : validation_sets(cfg_)) {
    val_sets_.push_back(
        {set.name, std::make_unique<ValidationSet>(set.dir, set.split, cfg_.model.seq_len,
                                                   cfg_.eval.max_windows)});
    check_same_tokenizer(loader_->info(), val_sets_.back().windows->info());
  }
  task_evals_ =
      std::make_unique<TaskEvals>(cfg_, loader_->info(), training_sources(cfg_).front().dir);

  local_seqs_ = batch_seqs_ / world_size_;
  micro_seqs_ = cfg_.train.micro_batch_seqs > 0 ? std::min(cfg_.train.micro_batch_seqs, local_seqs_)
                                                : local_seqs_;
  if (local_seqs_ % micro_seqs_ != 0) {
    throw InputError(cfg_.source + ": train.micro_batch_seqs = " + std::to_string(micro_seqs_) +
                     " must divide the per-rank batch of " + std::to_string(local_seqs_) +
                     " sequences");
  }
}

void Trainer::setup_model() {
  ModelSettings settings = model_settings(cfg_);
  settings.precision = precision_.precision;  // as agreed, not resolved again by each rank
  model_ = Transformer(settings, plan_.moe_context());
  model_->to(device_);
  plan_.parallelize(model_);
  for (auto& nb : model_->named_buffers()) buffers_.emplace_back(nb.key(), nb.value());
  auto stepped = plan_.stepped_tensors();
  optimizer_ = make_adamw(std::move(stepped.decayed), std::move(stepped.not_decayed), cfg_.optim);
  if (rank_ == 0) {
    spdlog::info("AdamW state: {:.3f} MiB on rank 0 ({})",
                 plan_.optimizer_state_bytes() / 1048576.0,
                 cfg_.parallel.shard_optimizer ? "sharded" : "replicated");
  }
  flops_per_token_ = model_flops_per_token(cfg_);
  checkpointer_ =
      std::make_unique<RunCheckpointer>(cfg_, plan_.groups().control, plan_.stacked_parameters());
}

void Trainer::resume_or_init() {
  TensorMap optimizer_state;
  if (auto resumed = checkpointer_->restore(parts_to_load(optimizer_state))) {
    plan_.load_optimizer_state(*optimizer_, optimizer_state);
    state_ = *resumed;
    resumed_step_ = state_.step;
    loader_->restore(state_.loader);
  } else if (!cfg_.train.init_from.empty()) {
    load_initial_weights(*checkpointer_, cfg_.train.init_from, plan_, buffers_);
  }
  guard_.restore(state_.nonfinite_total, state_.nonfinite_in_a_row);
}

// Under "auto" a resumed run trains on in the precision its checkpoint trained
// in, which a measurement here (another machine's, or a close one's) need not
// give again: its curve goes on as it was.
void Trainer::keep_resumed_precision() {
  if (cfg_.train.precision == Precision::kAuto && state_.precision) {
    precision_ = {*state_.precision, "auto: as the checkpoint resumed from trained"};
    model_->set_precision(*state_.precision);
  }
  state_.precision = precision_.precision;
  if (rank_ == 0) {
    spdlog::info("device {}, precision {} ({})", device_.str(), choice_name(precision_.precision),
                 precision_.reason);
  }
}

// bf16, asked for or kept from a checkpoint, where a new run under "auto" would
// train in fp32 (bf16 emulated, or native but not faster): slower, and rounded.
void Trainer::warn_if_bf16_does_not_pay() const {
  if (precision_.precision != Precision::kBf16) return;
  const RankCpu cpu = rank_cpu();
  const PrecisionChoice automatic =
      resolve_precision(Precision::kAuto, device_, cpu.features, cpu.rates);
  if (automatic.precision == Precision::kBf16) return;
  spdlog::warn("training in bf16 ({}) where a new run under \"auto\" would train in fp32 ({})",
               precision_.reason, automatic.reason);
}

void Trainer::choose_expert_gemm() {
  const int64_t ep = plan_.groups().ep_size;
  expert_gemm_ = moelab::choose_expert_gemm(
      cfg_, *model_, expert_shape(cfg_, ep, precision_.dtype(), device_),
      balanced_rows_per_expert(cfg_, micro_seqs_ * cfg_.model.seq_len, ep), state_.expert_gemm,
      plan_.control());
  if (expert_gemm_.path == ExpertGemm::kAuto) return;
  state_.expert_gemm = expert_gemm_.path;
  if (rank_ == 0) {
    spdlog::info("experts' GEMMs: {} ({})", choice_name(expert_gemm_.path), expert_gemm_.reason);
  }
}

void Trainer::open_logs(const nlohmann::json& places) {
  write_run_files(cfg_, plan_.groups(), precision_, expert_gemm_, places);
  metrics_ = std::make_unique<MetricsLog>(cfg_.train.out_dir, resumed_step_);
  // Named columns only where the config names its sets: other runs keep the plain val.csv.
  std::vector<std::string> set_columns;
  for (const auto& set : cfg_.eval.sets) set_columns.push_back(set.name);
  val_log_ = std::make_unique<ValLog>(cfg_.train.out_dir, resumed_step_, set_columns,
                                      task_evals_->columns());
  if (cfg_.log.tensorboard) {
    tensorboard_ = std::make_unique<TensorBoardLog>(cfg_.train.out_dir, resumed_step_);
  }
  progress_ = std::make_unique<Progress>(cfg_.train.max_steps, cfg_.log.progress);
  const auto dtype = precision_.dtype();
  peak_flops_ = matmul_peak_flops(dtype, torch::get_num_threads(), device_);
  if (MpiSession::rank() == 0) {
    warn_if_bf16_does_not_pay();
    for (const std::string& warning : config_warnings(cfg_)) spdlog::warn("{}", warning);
  }
}

TrainSummary Trainer::train() {
  TrainSummary summary;
  if (state_.step == 0) summary.last_val_loss = evaluate();  // the curve starts at initialisation
  const int64_t first_step = state_.step + 1;
  while (state_.step < cfg_.train.max_steps) {
    profiler_.before_step(state_.step + 1);
    // Start-up work in a process's first step (allocator, kernels, a GPU's
    // libraries) may outlast parallel.timeout_s on one rank.
    std::optional<LongPhase> warm_up;
    if (state_.step + 1 == first_step) warm_up.emplace(WorkPhase::kFirstStep);
    const StepResult result = train_step();
    warm_up.reset();
    checkpointer_->on_status(result.checkpoint_status);
    profiler_.after_step(state_.step);
    log_step(result);
    if (guard_.exhausted()) {
      summary.stopped_nonfinite = true;
      spdlog::error("stopping: {} non-finite losses in a row (train.max_nonfinite_steps)",
                    guard_.consecutive());
      break;
    }
    const bool last = state_.step == cfg_.train.max_steps;
    if (every(cfg_.eval.interval, state_.step) || last) summary.last_val_loss = evaluate();
    const bool saved = every(cfg_.checkpoint.interval, state_.step) || last;
    if (saved) checkpoint();
    if (result.stop_requested && !last) {
      stop_for_resume(saved);
      summary.stopped_by_signal = true;
      break;
    }
  }
  finish(summary);
  return summary;
}

// Where rank 0's step goes (time_ms): on more ranks, a rank waiting for a slower
// one waits inside the dispatch exchange (forward_backward) or in grad_sync.
Trainer::StepResult Trainer::train_step() {
  StepResult result;
  CollectiveWatchdog::set_step(state_.step + 1);
  const int64_t waited_us = collective_wait_us();
  // Peak memory costs /proc reads per phase: measured only where it is logged.
  StepPhases phases(logged(state_.step + 1) ? &peak_memory_ : nullptr);
  phases.begin("data");
  // The update about to be applied, counted from 1.
  result.lr = schedule_.at(state_.step + 1);
  set_lr(*optimizer_, result.lr);
  model_->zero_grad();
  const torch::Tensor batch = loader_->next().to(device_);
  if (rank_ == test_hooks().slow_rank) {  // tests only: a straggler
    std::this_thread::sleep_for(
        std::chrono::duration<double, std::milli>(test_hooks().slow_rank_ms));
  }

  phases.begin("forward_backward");
  StepLosses losses = forward_backward(batch);
  result.moe_stats = std::move(losses.moe_stats);

  phases.begin("grad_sync");
  reduce_step(losses, result);

  phases.begin("optimizer");
  optimizer_step(result);
  advance_state();
  phases.end();
  result.time_ms = std::move(phases.time_ms);
  result.peak_mib = std::move(phases.peak_mib);
  double total_ms = 0;
  for (const auto& [phase, ms] : result.time_ms.items()) total_ms += ms.get<double>();
  result.seconds = total_ms / 1000.0;
  result.work_ms = total_ms - double(collective_wait_us() - waited_us) / 1000.0;
  return result;
}

// Each micro-batch's loss is weighted by its share of the rank's batch, so the
// accumulated gradient is that of the rank's mean loss.
Trainer::StepLosses Trainer::forward_backward(const torch::Tensor& batch) {
  StepLosses losses;
  double weight = double(micro_seqs_) / double(local_seqs_);
  if (state_.step + 1 == test_hooks().nonfinite_step) weight = NAN;  // tests only
  for (int64_t m = 0; m < local_seqs_; m += micro_seqs_) {
    const auto chunk = batch.narrow(0, m, micro_seqs_);
    ModelOutput out = model_->forward(chunk.narrow(1, 0, cfg_.model.seq_len),
                                      chunk.narrow(1, 1, cfg_.model.seq_len));
    if (m + micro_seqs_ == local_seqs_) plan_.before_last_backward();
    ((out.lm_loss + out.aux_loss + out.z_loss + out.mtp_loss) * weight).backward();
    accumulate(losses.lm, out.lm_loss, weight);
    accumulate(losses.aux, out.aux_loss, weight);
    accumulate(losses.z, out.z_loss, weight);
    accumulate(losses.mtp, out.mtp_loss, weight);
    losses.mtp_ce.resize(out.mtp_ce.size());
    for (size_t k = 0; k < out.mtp_ce.size(); ++k)
      accumulate(losses.mtp_ce[k], out.mtp_ce[k], weight);
    losses.moe_stats = std::move(out.moe_stats);
  }
  return losses;
}

void Trainer::reduce_step(const StepLosses& losses, StepResult& result) {
  plan_.sync_gradients();
  const double stop = StopSignals::received() != 0 ? 1.0 : 0.0;
  std::vector<torch::Tensor> means = {losses.lm, losses.aux, losses.z, losses.mtp};
  means.insert(means.end(), losses.mtp_ce.begin(), losses.mtp_ce.end());
  const int64_t n = int64_t(means.size());
  means.push_back(plan_.grad_sq_norm(device_));
  const auto host = torch::stack(means).cpu();
  result.grad_norm = std::sqrt(host[n].item<double>());
  // The stop flag and the background checkpoint write's status ride on the
  // loss reduction: agreeing on them costs no message.
  auto summed = torch::cat(
      {host.narrow(0, 0, n), torch::tensor({stop}, torch::kDouble), checkpointer_->status()});
  plan_.control().all_reduce_sum(summed);
  result.checkpoint_status = summed.narrow(0, n + 1, 2);
  const auto mean = summed.narrow(0, 0, n) / double(world_size_);
  result.loss = mean[0].item<double>();
  result.aux_loss = mean[1].item<double>();
  result.z_loss = mean[2].item<double>();
  result.mtp_loss = mean[3].item<double>();
  for (int64_t k = 4; k < n; ++k) result.mtp_ce.push_back(mean[k].item<double>());
  result.stop_requested = summed[n].item<double>() > 0;
}

// Every rank sees the same reduced loss and norm, so all skip together.
void Trainer::optimizer_step(StepResult& result) {
  result.skipped = guard_.should_skip(std::isfinite(result.grad_norm) ? result.loss : NAN);
  if (!result.skipped) {
    plan_.clip_gradients(result.grad_norm, cfg_.optim.grad_clip);
    plan_.optimizer_step(*optimizer_);
  }
  model_->update_balance_biases(/*apply=*/!result.skipped);
  if (result.skipped && rank_ == 0) {
    spdlog::warn("step {}: non-finite loss or gradient, update skipped ({} in a row)", state_.step,
                 guard_.consecutive());
  }
}

void Trainer::advance_state() {
  state_.step += 1;
  state_.tokens += batch_seqs_ * cfg_.model.seq_len;
  state_.loader = loader_->state();
  state_.nonfinite_total = guard_.total();
  state_.nonfinite_in_a_row = guard_.consecutive();
}

double Trainer::evaluate() {
  std::vector<double> losses;
  // "val_loss/<name>" for each set the config names (TensorBoard tags, log lines).
  std::vector<std::pair<std::string, double>> named;
  for (const auto& set : val_sets_) {
    losses.push_back(moelab::evaluate(model_, *set.windows, cfg_.eval.batch_seqs,
                                      plan_.groups().dp.get(), device_)
                         .loss);
    if (!cfg_.eval.sets.empty()) named.emplace_back("val_loss/" + set.name, losses.back());
  }
  const TaskEvalRow tasks = task_evals_->run(state_.step, model_, plan_.groups().dp.get(), device_);
  state_.best_val_loss = std::min(state_.best_val_loss, losses.front());
  if (rank_ == 0) {
    const double best = val_log_->write(state_.step, state_.tokens, losses, tasks.cells);
    for (const auto& [tag, loss] : named) spdlog::info("step {} {} {:.4f}", state_.step, tag, loss);
    named.insert(named.end(), tasks.scalars.begin(), tasks.scalars.end());
    if (tensorboard_) tensorboard_->write_validation(state_.step, losses.front(), best, named);
    if (!tasks.summary.empty()) spdlog::info("step {} tasks: {}", state_.step, tasks.summary);
    spdlog::info("step {} val_loss {:.4f} (best {:.4f})", state_.step, losses.front(),
                 state_.best_val_loss);
  }
  return losses.front();
}

nlohmann::json Trainer::data_metrics() const {
  nlohmann::json tokens, epochs;
  for (size_t s = 0; s < source_names_.size(); ++s) {
    tokens[source_names_[s]] = loader_->taken()[s] * cfg_.model.seq_len;
    epochs[source_names_[s]] = loader_->epoch(s);
  }
  return {{"tokens", tokens}, {"epoch", epochs}};
}

void Trainer::stop_for_resume(bool saved) {
  if (!saved) checkpoint();
  checkpointer_->wait();
  if (rank_ == 0) {
    spdlog::warn(
        "stop signal: checkpoint saved at step {}; exiting with status {} so the job is "
        "requeued (resume with --resume auto)",
        state_.step, kExitStoppedForResume);
  }
}

TensorParts Trainer::parts_to_save() const {
  TensorParts parts = plan_.parts_to_save(*optimizer_);
  if (rank_ == 0) {  // the same on every rank
    for (const auto& [name, b] : buffers_) parts.push_back(whole_part(name, b));
  }
  return parts;
}

TensorParts Trainer::parts_to_load(TensorMap& optimizer_state) const {
  TensorParts parts = plan_.parts_to_load(optimizer_state);
  for (const auto& [name, b] : buffers_) parts.push_back(whole_part(name, b));
  return parts;
}

void Trainer::checkpoint() {
  const Stopwatch paused;
  checkpointer_->save(parts_to_save(), state_);
  if (rank_ == 0) {
    spdlog::info("checkpoint at step {}: training paused {:.2f} s{}", state_.step, paused.seconds(),
                 cfg_.checkpoint.async ? " (copy to host memory; written in the background)" : "");
  }
}

bool Trainer::logged(int64_t step) const {
  return every(cfg_.log.interval, step) || step == cfg_.train.max_steps;
}

void Trainer::log_step(const StepResult& r) {
  const bool log_now = logged(state_.step);
  // Collective: every rank takes part in these reductions.
  const nlohmann::json moe = log_now ? moe_metrics(r.moe_stats, plan_.control()) : nullptr;
  const nlohmann::json ranks =
      log_now ? phase_times_over_ranks(r.time_ms, r.work_ms, plan_.control()) : nullptr;
  if (rank_ != 0) return;
  const int64_t tokens_per_step = batch_seqs_ * cfg_.model.seq_len;
  const double tokens_per_s = double(tokens_per_step) / r.seconds;
  progress_->update(state_.step, r.loss, tokens_per_s, r.lr);
  if (!log_now) return;
  nlohmann::json line = {{"step", state_.step},
                         {"tokens", state_.tokens},
                         {"epoch", loader_->epoch()},
                         {"lr", r.lr},
                         {"loss", r.loss},
                         {"aux_loss", r.aux_loss},
                         {"z_loss", r.z_loss},
                         {"grad_norm", r.grad_norm},
                         {"tokens_per_s", tokens_per_s},
                         {"elapsed_s", wall_.peek() / 1000.0},
                         {"mfu", flops_per_token_ * tokens_per_s / (peak_flops_ * world_size_)},
                         {"time_ms", r.time_ms},
                         {"peak_mib", r.peak_mib},
                         {"skipped", r.skipped},
                         {"nonfinite_total", state_.nonfinite_total},
                         {"data", data_metrics()}};
  line.update(ranks);
  if (!moe.is_null()) line["moe"] = moe;
  if (!r.mtp_ce.empty()) add_mtp_metrics(r.mtp_loss, r.mtp_ce, line);
  metrics_->write(line);
  if (tensorboard_) tensorboard_->write_metrics(line);
}

// Peak memory per rank (expert weights and their optimizer state shrink with
// ep), and DONE with the run's summary when it completed.
void Trainer::finish(TrainSummary& summary) {
  checkpointer_->wait();
  if (rank_ == 0) progress_->finish();
  summary.steps = state_.step;
  summary.tokens = state_.tokens;
  summary.best_val_loss = state_.best_val_loss;
  summary.nonfinite_steps = state_.nonfinite_total;
  auto peak_mib = plan_.control().all_gather(torch::tensor({peak_resident_mib()}, torch::kDouble));
  const std::vector<double> peak_per_rank(peak_mib.data_ptr<double>(),
                                          peak_mib.data_ptr<double>() + peak_mib.numel());
  if (rank_ != 0) return;
  spdlog::info("peak resident memory per rank (MiB): {:.0f}", fmt::join(peak_per_rank, " "));
  if (summary.stopped_nonfinite || summary.stopped_by_signal) return;
  write_done_file(cfg_, {{"steps", summary.steps},
                         {"tokens", summary.tokens},
                         {"best_val_loss", summary.best_val_loss},
                         {"final_val_loss", summary.last_val_loss},
                         {"nonfinite_steps", summary.nonfinite_steps},
                         {"wall_seconds", wall_.lap() / 1000.0},
                         {"peak_resident_mib", peak_per_rank}});
}

TrainSummary run_training(const Config& cfg) {
  return Trainer(cfg).train();
}

}  // namespace moelab
