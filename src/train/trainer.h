// The training loop: a Trainer trains one run, collectively over every MPI rank.
// Its parts read in order (torchtitan's Trainer, llm.c's forward/backward/update):
// the constructor sets up (groups, data, model, parallelism, optimizer, resume);
// train() repeats train_step() (forward_backward over the micro-batches,
// gradient sync, clip, optimizer step, non-finite guard) with evaluate(),
// checkpoint() and log_step() at their intervals.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "checkpoint/run_checkpoint.h"
#include "comm/watchdog.h"
#include "config/config.h"
#include "data/batch_loader.h"
#include "data/validation_set.h"
#include "metrics/metrics_log.h"
#include "metrics/progress.h"
#include "metrics/tensorboard_log.h"
#include "model/precision.h"
#include "model/transformer.h"
#include "parallel/parallel_plan.h"
#include "train/lr_schedule.h"
#include "train/nonfinite_guard.h"
#include "train/run_lock.h"
#include "train/run_training.h"
#include "train/step_profiler.h"
#include "train/stop_signal.h"
#include "train/task_evals.h"
#include "util/peak_memory.h"
#include "util/stopwatch.h"

namespace moelab {

class Trainer {
 public:
  // Collective: every rank builds its groups, data, model and optimizer, and
  // resumes from a checkpoint or train.init_from when the config says so.
  explicit Trainer(const Config& cfg);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // Trains to train.max_steps into cfg.train.out_dir: config.resolved.toml,
  // run.json, metrics.jsonl, val.csv, checkpoints/, and DONE when it completed.
  TrainSummary train();

 private:
  // Losses of one step, weighted over its micro-batches, still on the device.
  struct StepLosses {
    torch::Tensor lm, aux, z, mtp;
    std::vector<torch::Tensor> mtp_ce;     // per MTP depth (train.mtp_depth)
    std::vector<MoeLayerStats> moe_stats;  // of the last micro-batch
  };
  // What one step did, reduced over every rank.
  struct StepResult {
    double lr = 0, loss = 0, aux_loss = 0, z_loss = 0, mtp_loss = 0, grad_norm = 0;
    std::vector<double> mtp_ce;  // per MTP depth
    bool skipped = false;
    bool stop_requested = false;      // a stop signal reached some rank (agreed by all)
    torch::Tensor checkpoint_status;  // RunCheckpointer::status() summed over the ranks
    std::vector<MoeLayerStats> moe_stats;
    nlohmann::json time_ms;   // per phase (step_phases.h)
    double work_ms = 0;       // the step's time outside collectives
    nlohmann::json peak_mib;  // per phase, where it can be measured
    double seconds = 0;
  };

  void setup_data();
  void setup_model();
  void resume_or_init();
  void keep_resumed_precision();
  void warn_if_bf16_does_not_pay() const;
  void choose_expert_gemm();
  void open_logs(const nlohmann::json& places);

  StepResult train_step();
  StepLosses forward_backward(const torch::Tensor& batch);
  // Gradient sync and the step's loss, aux, z and MTP losses, gradient norm and
  // stop request, reduced over every rank with one read-back to the host.
  void reduce_step(const StepLosses& losses, StepResult& result);
  void optimizer_step(StepResult& result);
  void advance_state();

  // Every validation set's loss, logged; returns the first set's.
  double evaluate();
  // Per source: tokens trained on and the epoch it is in.
  nlohmann::json data_metrics() const;
  // This rank's parts of the run's tensors, to write (the model's buffers and
  // the RNG are rank 0's) or to read into.
  TensorParts parts_to_save() const;
  TensorParts parts_to_load(TensorMap& optimizer_state) const;
  void checkpoint();
  // After a stop signal: the checkpoint at this step (unless `saved` already).
  void stop_for_resume(bool saved);
  // Whether step `step` (counted from 1) writes a metrics line.
  bool logged(int64_t step) const;
  void log_step(const StepResult& result);
  void finish(TrainSummary& summary);

  const Config cfg_;
  Stopwatch wall_;
  CollectiveWatchdog watchdog_;
  StopSignals stop_signals_;
  ParallelPlan plan_;
  // Taken before anything is written into the run folder; refreshed by the
  // watchdog's heartbeat thread, which shares it.
  std::shared_ptr<RunLock> run_lock_;
  int rank_, world_size_;
  torch::Device device_;
  PrecisionChoice precision_;
  ExpertGemmChoice expert_gemm_;
  int64_t batch_seqs_ = 0, local_seqs_ = 0, micro_seqs_ = 0;
  std::unique_ptr<BatchLoader> loader_;
  std::vector<std::string> source_names_;  // the mixture's, in loader order
  struct NamedValidationSet {
    std::string name;
    std::unique_ptr<ValidationSet> windows;
  };
  std::vector<NamedValidationSet> val_sets_;  // the first defines best_val_loss
  std::unique_ptr<TaskEvals> task_evals_;     // [[eval.tasks]], scored at validations
  Transformer model_{nullptr};
  NamedParams buffers_;
  std::unique_ptr<torch::optim::AdamW> optimizer_;
  std::unique_ptr<RunCheckpointer> checkpointer_;
  LrSchedule schedule_;
  TrainState state_;
  int64_t resumed_step_ = -1;  // -1: a fresh run starts its logs anew
  NonfiniteGuard guard_;
  PeakMemory peak_memory_;
  StepProfiler profiler_;
  // Rank 0 only.
  std::unique_ptr<MetricsLog> metrics_;
  std::unique_ptr<ValLog> val_log_;
  std::unique_ptr<TensorBoardLog> tensorboard_;  // unless log.tensorboard = false
  std::unique_ptr<Progress> progress_;
  double peak_flops_ = 0, flops_per_token_ = 0;
};

}  // namespace moelab
