// A task's scores from each choice's log-likelihood, as OLMo's in-loop ICL
// metric and lm-evaluation-harness define them (docs/evaluation.md). For an
// item with choices c, gold g, LL_c the summed log-probability of c's
// continuation tokens given its context, chars_c / bytes_c / tokens_c its length:
//   acc       multiple choice: argmax_c LL_c == g;  cloze: every continuation
//             token is the model's argmax (lm-evaluation-harness's LAMBADA acc)
//   len_norm  argmax_c LL_c / chars_c == g           (acc_per_char, acc_norm)
//   tok_norm  argmax_c LL_c / tokens_c == g          (acc_per_token)
//   bpb       -LL_g / (bytes_g * ln 2)                (bits per byte of the gold)
// each averaged over items; argmax takes the first of equal values.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tasks/task_file.h"

namespace moelab {

struct ChoiceScore {
  double loglik = 0;
  bool greedy = false;  // every continuation token was the argmax
};

struct TaskScores {
  int64_t items = 0;
  std::map<std::string, double> metrics;    // by metric name
  std::map<std::string, double> group_acc;  // acc per item group (BLiMP's paradigms)
};

// The metrics a task's val.csv columns and report carry, in column order:
// acc, len_norm, bpb (multiple choice); acc, bpb (cloze).
std::vector<std::string> task_column_metrics(TaskKind kind);

// `scores[i][c]`: item i's choice c.
TaskScores score_task(TaskKind kind, const std::vector<TaskItem>& items,
                      const std::vector<std::vector<ChoiceScore>>& scores);

}  // namespace moelab
