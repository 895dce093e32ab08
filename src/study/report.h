// `moelab report`: aggregates a study's runs into summary.md, summary.json,
// curves.csv and gap_curves.csv (tables need no Python), then asks
// plot_study.py for curves.png and gaps.png. Only finished runs are averaged;
// missing or unfinished ones are listed, and n is reported per variant.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "study/run_results.h"
#include "study/stats.h"
#include "study/study_plan.h"

namespace moelab {

struct VariantSummary {
  PlannedVariant planned;
  size_t planned_runs = 0;
  MeanStd best_val_loss;
  MeanStd final_val_loss;
  MeanStd wall_seconds;
  MeanStd tokens;  // from the DONE records (what was actually trained)
};

struct PairSummary {
  VariantPair pair;
  std::vector<int64_t> seeds;  // seeds where both runs finished
  MeanStd best_gap;            // best_val_loss(a) - best_val_loss(b), per seed
  MeanStd final_gap;
};

struct StudyReport {
  StudyPlan plan;
  std::vector<std::string> axis_order;  // the plan's axes, x first (axis_report.h)
  std::vector<RunResult> runs;          // in plan order
  std::vector<VariantSummary> variants;
  std::vector<PairSummary> pairs;
  size_t missing() const;  // runs without a usable DONE
};

StudyReport build_report(const StudyPlan& plan);

// The run of `variant` and `seed` among `runs`, or nullptr.
const RunResult* find_run(const std::vector<RunResult>& runs, const std::string& variant,
                          int64_t seed);

// Every finished run's named values per validation point (a ValPoint member:
// its sets' losses, its task scores), one row each:
// variant,seed,<name_column>,step,tokens,<value_column>.
std::string named_curves_csv(const StudyReport& report,
                             std::vector<std::pair<std::string, double>> ValPoint::*values,
                             const std::string& name_column, const std::string& value_column);

// A CSV cell: `x` to 6 significant digits, empty where there is no value (no
// finished seed; no spread with one seed).
std::string csv_number(std::optional<double> x);

// Writes summary.md, summary.json, curves.csv and gap_curves.csv into `dir`,
// and axis_summary.csv for a grid study.
void write_report_tables(const StudyReport& report, const std::string& dir);
std::string summary_markdown(const StudyReport& report);

// Runs `python3 <script> <dir>` (the first of $MOELAB_PYTHON, python3,
// /usr/bin/python3 that has matplotlib). Warns and returns false when none does
// or the script fails: plots are optional, the tables are not.
bool render_plots(const std::string& dir, const std::string& script);

// The whole report into `dir`: tables, then (if `plots`) the plots from
// plot_study.py (found with find_support_file; skipped with a warning when
// unavailable). A grid study's results go against its axes with `x` along the
// x axis and one line per value of `lines` (empty: the study's axis order).
StudyReport write_study_report(const StudyPlan& plan, const std::string& dir, bool plots = true,
                               const std::string& x = "", const std::string& lines = "");

}  // namespace moelab
