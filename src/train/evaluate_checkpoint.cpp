#include "train/evaluate_checkpoint.h"

#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint_io.h"
#include "comm/cuda_device.h"
#include "comm/process_groups.h"
#include "config/data_sets.h"
#include "config/load.h"
#include "data/validation_set.h"
#include "model/transformer.h"
#include "parallel/parallel_plan.h"
#include "train/checkpoint_model.h"
#include "train/evaluator.h"
#include "train/initial_weights.h"
#include "train/task_suite.h"
#include "util/error.h"
#include "util/stopwatch.h"

namespace moelab {
namespace {

struct CheckpointMeta {
  Config cfg;
  int64_t step = 0;
};

// The run's config and step from meta.json (the tensors are checked as they load).
CheckpointMeta checkpoint_meta(const std::string& checkpoint, int64_t ep) {
  const nlohmann::json meta = read_checkpoint_meta(checkpoint);
  return {saved_run_config(meta, checkpoint,
                           {"parallel.ep=" + std::to_string(ep), "checkpoint.resume=none"}),
          meta.value("step", int64_t(0))};
}

// The prepared tasks to score: those named, or every task of the folder.
std::vector<EvalTask> tasks_to_score(const EvalCheckpointOptions& opts) {
  std::vector<std::string> names = opts.tasks;
  if (names.empty()) {
    for (const TaskHeader& t : read_prepared_tasks(opts.tasks_dir).tasks) names.push_back(t.name);
  }
  std::vector<EvalTask> tasks;
  for (const std::string& name : names) tasks.push_back({name, opts.tasks_dir, 0, opts.limit});
  return tasks;
}

}  // namespace

CheckpointModel load_checkpoint_model(const std::string& checkpoint, int64_t ep) {
  CheckpointMeta meta = checkpoint_meta(checkpoint, ep);
  CheckpointModel loaded;
  loaded.cfg = std::move(meta.cfg);
  loaded.step = meta.step;
  const Config& cfg = loaded.cfg;
  if (cfg.train.threads > 0) torch::set_num_threads(int(cfg.train.threads));
  loaded.plan = std::make_unique<ParallelPlan>(make_process_groups(cfg), cfg);
  ParallelPlan& plan = *loaded.plan;
  loaded.device = run_device(cfg);
  loaded.model = Transformer(model_settings(cfg), plan.moe_context());
  loaded.model->to(loaded.device);
  plan.parallelize(loaded.model);
  NamedParams buffers;
  for (auto& nb : loaded.model->named_buffers()) buffers.emplace_back(nb.key(), nb.value());
  RunCheckpointer checkpointer(cfg, plan.groups().control, plan.stacked_parameters());
  load_initial_weights(checkpointer, checkpoint, plan, buffers);
  return loaded;
}

EvalCheckpointResult evaluate_checkpoint(const EvalCheckpointOptions& opts) {
  CheckpointModel loaded = load_checkpoint_model(opts.checkpoint, opts.ep);
  const Config& cfg = loaded.cfg;
  // The run's first validation set unless the options name another.
  const EvalSet first = validation_sets(cfg).front();
  const std::string dir = opts.data_dir.empty() ? first.dir : opts.data_dir;
  const std::string split = opts.split.empty() ? first.split : opts.split;
  ValidationSet val(dir, split, cfg.model.seq_len, opts.max_windows);
  check_vocab_matches(val.info(), cfg.model.vocab_size);
  std::unique_ptr<TaskSuite> suite;
  if (!opts.tasks_dir.empty()) {
    suite = std::make_unique<TaskSuite>(tasks_to_score(opts), cfg.model.vocab_size,
                                        val.info().tokenizer_checksum, dir);
  }

  Communicator* dp = loaded.plan->groups().dp.get();
  Stopwatch clock;
  const EvalResult loss = evaluate(loaded.model, val, opts.batch_seqs, dp, loaded.device);
  EvalCheckpointResult result{loaded.step, split, loss.loss, loss.tokens, clock.seconds(), {}};
  const TaskBatching batching{cfg.model.seq_len, opts.batch_seqs, suite ? suite->pad_id() : 0};
  for (size_t t = 0; suite && t < suite->size(); ++t) {
    result.tasks.push_back(suite->score(t, loaded.model, batching, dp, loaded.device));
  }
  return result;
}

}  // namespace moelab
