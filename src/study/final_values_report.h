// A study's per-name final values in its report: each named validation set's
// loss ([[eval.sets]], val.csv's val_loss/<name> columns) and each downstream
// task's score ([[eval.tasks]], task/<task>/<metric> columns). Per variant the
// final value per name (mean ± std over seeds, the matched dense beside the
// MoE as the variants table lists them), each pair's per-seed gap and whether
// it exceeds the seed spread, and every point for the curves.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "study/report.h"

namespace moelab {

// "" when no finished run has a named set (or a task).
std::string set_summary_markdown(const StudyReport& report);
std::string task_summary_markdown(const StudyReport& report);
// task_curves.csv: variant,seed,task,step,tokens,value ("task" is <task>/<metric>).
std::string task_curves_csv(const StudyReport& report);
// summary.json's "sets": {variant: {set: {n, mean, std}}}, "set_gaps": {pair:
// {set: {n, mean, std}}}, and the same as "tasks" and "task_gaps".
nlohmann::json final_values_json(const StudyReport& report);

}  // namespace moelab
