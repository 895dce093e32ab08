// A grid study's results against its axes: best validation loss (mean ± std
// over seeds) per grid point, as axis_summary.csv (which plot_study.py draws as
// axis.png: the first axis column along x, one line per value of the second)
// and as a markdown table.
#pragma once

#include <string>
#include <vector>

#include "study/report.h"

namespace moelab {

// The plan's axes with `x` first and `lines` second (either may be empty: the
// study order fills in); InputError naming the study's axes for an unknown one.
std::vector<std::string> axis_order(const StudyPlan& plan, const std::string& x,
                                    const std::string& lines);

// variant,kind,<axes in order>,n,best_mean,best_std,total_params,active_params:
// one row per variant with grid coordinates; kind is "moe" or "dense".
std::string axis_summary_csv(const StudyReport& report, const std::vector<std::string>& order);

// The same as a markdown section ("" for a study without axes).
std::string axis_summary_markdown(const StudyReport& report, const std::vector<std::string>& order);

}  // namespace moelab
