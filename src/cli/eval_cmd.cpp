// `moelab eval CHECKPOINT`: the validation loss of a saved model on any split,
// and with --tasks its downstream task scores (a table, and JSON).
#include <fmt/format.h>

#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "tasks/task_metrics.h"
#include "train/evaluate_checkpoint.h"
#include "util/atomic_file.h"
#include "util/mpi_session.h"

namespace moelab {
namespace {

std::string metric_cell(const TaskResult& t, const std::string& metric) {
  const auto it = t.scores.metrics.find(metric);
  return it == t.scores.metrics.end() ? "-" : fmt::format("{:.4f}", it->second);
}

void print_task_table(const std::vector<TaskResult>& tasks) {
  std::cout << fmt::format("{:<24} {:>7} {:>8} {:>8} {:>8} {:>8} {:>11}\n", "task", "items", "acc",
                           "len_norm", "tok_norm", "bpb", "tokens/s");
  for (const TaskResult& t : tasks) {
    std::cout << fmt::format("{:<24} {:>7} {:>8} {:>8} {:>8} {:>8} {:>11.0f}\n", t.name,
                             t.scores.items, metric_cell(t, "acc"), metric_cell(t, "len_norm"),
                             metric_cell(t, "tok_norm"), metric_cell(t, "bpb"),
                             double(t.choices.tokens) / std::max(t.seconds, 1e-9));
  }
}

nlohmann::json result_json(const EvalCheckpointOptions& opts, const EvalCheckpointResult& r) {
  nlohmann::json tasks = nlohmann::json::object();
  for (const TaskResult& t : r.tasks) tasks[t.name] = task_result_json(t);
  return {{"checkpoint", opts.checkpoint},
          {"step", r.step},
          {"world", MpiSession::size()},
          {"ep", opts.ep},
          {"loss",
           {{"split", r.split},
            {"value", r.loss},
            {"tokens", r.tokens},
            {"seconds", r.loss_seconds},
            {"tokens_per_s", double(r.tokens) / std::max(r.loss_seconds, 1e-9)}}},
          {"tasks_dir", opts.tasks_dir},
          {"limit", opts.limit},
          {"tasks", tasks}};
}

}  // namespace

void add_eval_command(CLI::App& root) {
  auto opts = std::make_shared<EvalCheckpointOptions>();
  auto json_path = std::make_shared<std::string>("eval.json");
  auto* cmd = root.add_subcommand(
      "eval", "Evaluate a checkpoint: its loss on a prepared split, and downstream tasks");
  cmd->add_option("checkpoint", opts->checkpoint, "checkpoint folder (run/checkpoints/step_N)")
      ->required();
  cmd->add_option("--data", opts->data_dir, "prepared dataset folder (default: the run's)");
  cmd->add_option("--split", opts->split, "split to evaluate (default: the run's val split)");
  cmd->add_option("--max-windows", opts->max_windows, "windows to use (0 = all)");
  cmd->add_option("--batch-seqs", opts->batch_seqs, "sequences per forward pass");
  cmd->add_option("--ep", opts->ep, "expert-parallel group size (divides the ranks)");
  cmd->add_option("--tasks", opts->tasks_dir, "prepared task folder (moelab tasks prep --out)");
  cmd->add_option("--only", opts->tasks, "tasks of that folder to score (default: all)")
      ->delimiter(',');
  cmd->add_option("--limit", opts->limit, "each task's first N items (0 = all)");
  cmd->add_option("--json", *json_path, "where the scores go as JSON, with --tasks");
  cmd->callback([opts, json_path] {
    const EvalCheckpointResult r = evaluate_checkpoint(*opts);
    if (MpiSession::rank() != 0) return;
    std::cout << "checkpoint " << opts->checkpoint << " step " << r.step << " split " << r.split
              << ": loss " << r.loss << " over " << r.tokens << " tokens ("
              << fmt::format("{:.0f}", double(r.tokens) / std::max(r.loss_seconds, 1e-9))
              << " tokens/s)\n";
    if (opts->tasks_dir.empty()) return;
    print_task_table(r.tasks);
    write_file_atomically(*json_path, result_json(*opts, r).dump(1) + "\n");
    std::cout << "scores written to " << *json_path << "\n";
  });
}

}  // namespace moelab
