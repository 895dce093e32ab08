#include "train/task_suite.h"

#include <algorithm>

#include "util/stopwatch.h"

namespace moelab {

TaskSuite::TaskSuite(const std::vector<EvalTask>& tasks, int64_t vocab_size,
                     const std::string& tokenizer_checksum, const std::string& data_dir) {
  for (const EvalTask& spec : tasks) {
    const PreparedTasks prepared = read_prepared_tasks(spec.dir);
    check_task_tokenizer(prepared, tokenizer_checksum, data_dir);
    pad_id_ = prepared.eos_id;
    tasks_.push_back({spec, prepared.task(spec.name).kind,
                      read_task_items(prepared, spec.name, spec.limit, vocab_size)});
  }
}

std::vector<std::string> TaskSuite::column_names() const {
  std::vector<std::string> names;
  for (const Loaded& t : tasks_) {
    for (const std::string& metric : task_column_metrics(t.kind)) {
      names.push_back("task/" + t.spec.name + "/" + metric);
    }
  }
  return names;
}

TaskResult TaskSuite::score(size_t task, Transformer& model, const TaskBatching& batching,
                            Communicator* dp, const torch::Device& device) const {
  const Loaded& t = tasks_[task];
  Stopwatch clock;
  TaskResult result;
  result.name = t.spec.name;
  result.kind = t.kind;
  result.choices = score_choices(model, t.items, batching, dp, device, t.spec.name);
  result.scores = score_task(t.kind, t.items, result.choices.scores);
  result.seconds = clock.peek() / 1000.0;
  return result;
}

nlohmann::json task_result_json(const TaskResult& result) {
  nlohmann::json loglik = nlohmann::json::array(), greedy = nlohmann::json::array();
  for (const auto& item : result.choices.scores) {
    nlohmann::json ll = nlohmann::json::array(), g = nlohmann::json::array();
    for (const ChoiceScore& c : item) {
      ll.push_back(c.loglik);
      g.push_back(c.greedy);
    }
    loglik.push_back(std::move(ll));
    greedy.push_back(std::move(g));
  }
  return {{"kind", task_kind_name(result.kind)},
          {"items", result.scores.items},
          {"metrics", result.scores.metrics},
          {"groups", result.scores.group_acc},
          {"tokens", result.choices.tokens},
          {"seconds", result.seconds},
          {"tokens_per_s", double(result.choices.tokens) / std::max(result.seconds, 1e-9)},
          {"loglik", std::move(loglik)},
          {"greedy", std::move(greedy)}};
}

}  // namespace moelab
