// What scoring a downstream task gives: every choice's score and the task's
// metrics, free of the model, so that what reports them needs no torch.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tasks/task_file.h"
#include "tasks/task_metrics.h"

namespace moelab {

struct ScoredChoices {
  std::vector<std::vector<ChoiceScore>> scores;  // [item][choice]
  int64_t tokens = 0;                            // input tokens forwarded, over every rank
};

struct TaskResult {
  std::string name;
  TaskKind kind = TaskKind::kMultipleChoice;
  TaskScores scores;
  ScoredChoices choices;
  double seconds = 0;
};

// A result as JSON: metrics, per-group accuracy, tokens and time, and every
// choice's log-likelihood and greedy flag ([item][choice]). Defined in
// task_suite.cpp, beside the scoring that fills it.
nlohmann::json task_result_json(const TaskResult& result);

}  // namespace moelab
