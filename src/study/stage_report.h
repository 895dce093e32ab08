// A staged study's cost accounting: a run's own tokens, FLOPs and wall time,
// and the same with its parents' chain, so a child started from a trained
// parent and a variant trained from scratch compare at equal total compute.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "study/report.h"

namespace moelab {

struct RunCost {
  double tokens = 0;
  double flops = 0;  // tokens x the variant's model_flops_per_token
  double wall_seconds = 0;
};

// A finished run's cost: its own DONE record, plus (with_parents) each
// ancestor's own cost up to the step its child started from (the parent's
// tokens and FLOPs exactly, its wall time pro rata to steps), and theirs.
// nullopt when the run or an ancestor has no usable DONE record.
std::optional<RunCost> run_cost(const StudyReport& report, const RunResult& run, bool with_parents);

// The "Cost with the parents' chain" table of summary.md ("" for a study
// without staged variants) and its summary.json entries (per variant: own and
// total tokens, FLOPs and wall time as mean ± std over the runs counted).
std::string stage_summary_markdown(const StudyReport& report);
nlohmann::json stage_summary_json(const StudyReport& report);

}  // namespace moelab
