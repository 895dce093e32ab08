#include "study/axis_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "util/error.h"

namespace moelab {
namespace {

std::string value_at(const PlannedVariant& v, const std::string& axis) {
  for (const auto& [name, label] : v.point) {
    if (name == axis) return label;
  }
  return "";
}

}  // namespace

std::vector<std::string> axis_order(const StudyPlan& plan, const std::string& x,
                                    const std::string& lines) {
  std::vector<std::string> order;
  for (const std::string& wanted : {x, lines}) {
    if (wanted.empty()) continue;
    if (std::find(plan.axes.begin(), plan.axes.end(), wanted) == plan.axes.end()) {
      std::string known;
      for (const auto& a : plan.axes) known += (known.empty() ? "" : ", ") + a;
      throw InputError("study '" + plan.name + "' has no axis '" + wanted +
                       "' (axes: " + (known.empty() ? "none" : known) + ")");
    }
    if (std::find(order.begin(), order.end(), wanted) == order.end()) order.push_back(wanted);
  }
  for (const auto& a : plan.axes) {
    if (std::find(order.begin(), order.end(), a) == order.end()) order.push_back(a);
  }
  return order;
}

std::string axis_summary_csv(const StudyReport& report, const std::vector<std::string>& order) {
  std::string csv = "variant,kind";
  for (const auto& a : order) csv += "," + a;
  csv += ",n,best_mean,best_std,total_params,active_params\n";
  for (const auto& v : report.variants) {
    if (v.planned.point.empty()) continue;
    csv += v.planned.name + (v.planned.moe ? ",moe" : ",dense");
    for (const auto& a : order) csv += "," + value_at(v.planned, a);
    csv += fmt::format(
        ",{},{},{},{},{}\n", v.best_val_loss.n,
        csv_number(v.best_val_loss.n > 0 ? std::optional<double>(v.best_val_loss.mean)
                                         : std::nullopt),
        csv_number(v.best_val_loss.std), v.planned.total_params, v.planned.active_params);
  }
  return csv;
}

std::string axis_summary_markdown(const StudyReport& report,
                                  const std::vector<std::string>& order) {
  if (order.empty()) return "";
  std::string md = "\n## Best validation loss by grid point\n\n| variant |";
  std::string rule = "|---|";
  for (const auto& a : order) {
    md += " " + a + " |";
    rule += "---|";
  }
  md += " n | best val loss | total params | active params |\n" + rule + "---|---|---|---|\n";
  for (const auto& v : report.variants) {
    if (v.planned.point.empty()) continue;
    md += "| " + v.planned.name + " |";
    for (const auto& a : order) md += " " + value_at(v.planned, a) + " |";
    md += fmt::format(" {}/{} | {} | {} | {} |\n", v.best_val_loss.n, v.planned_runs,
                      format_mean_std(v.best_val_loss), v.planned.total_params,
                      v.planned.active_params);
  }
  return md;
}

}  // namespace moelab
