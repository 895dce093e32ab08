#include "train/task_evals.h"

#include <fmt/format.h>

#include "tasks/task_metrics.h"

namespace moelab {

TaskEvals::TaskEvals(const Config& cfg, const DatasetInfo& data, const std::string& data_dir)
    : suite_(cfg.eval.tasks, cfg.model.vocab_size, data.tokenizer_checksum, data_dir),
      max_steps_(cfg.train.max_steps),
      columns_(suite_.column_names()) {
  batching_ = {cfg.model.seq_len, cfg.eval.batch_seqs, suite_.pad_id()};
}

bool TaskEvals::due(size_t task, int64_t step) const {
  const int64_t interval = suite_.spec(task).interval;
  return step == 0 || step == max_steps_ || interval == 0 || step % interval == 0;
}

TaskEvalRow TaskEvals::run(int64_t step, Transformer& model, Communicator* dp,
                           const torch::Device& device) {
  TaskEvalRow row;
  std::string summary;
  for (size_t t = 0; t < suite_.size(); ++t) {
    const std::vector<std::string> metrics = task_column_metrics(suite_.kind(t));
    if (!due(t, step)) {
      row.cells.resize(row.cells.size() + metrics.size());
      continue;
    }
    const TaskResult result = suite_.score(t, model, batching_, dp, device);
    row.seconds += result.seconds;
    summary += " " + result.name;
    for (const std::string& metric : metrics) {
      const double value = result.scores.metrics.at(metric);
      row.cells.push_back(value);
      row.scalars.emplace_back("task/" + result.name + "/" + metric, value);
      summary += fmt::format(" {} {:.4f}", metric, value);
    }
  }
  if (!summary.empty()) {
    row.summary = fmt::format("{} ({:.1f} s)", summary.substr(1), row.seconds);
  }
  return row;
}

}  // namespace moelab
