// The downstream tasks of a study's runs ([[eval.tasks]], val.csv's
// task/<task>/<metric> columns) in its report: each variant's final score per
// task metric (mean ± std over seeds, the matched dense beside the MoE as the
// variants table lists them), each pair's per-seed gap and whether it exceeds
// the seed spread, and every scored point for the curves.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "study/report.h"

namespace moelab {

// "" when no finished run scored a task.
std::string task_summary_markdown(const StudyReport& report);
// task_curves.csv: variant,seed,task,step,tokens,value ("task" is <task>/<metric>).
std::string task_curves_csv(const StudyReport& report);
// summary.json's "tasks": {variant: {<task>/<metric>: {n, mean, std}}}, and
// "task_gaps": {pair: {<task>/<metric>: {n, mean, std}}}.
nlohmann::json task_summary_json(const StudyReport& report);

}  // namespace moelab
