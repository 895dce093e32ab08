#include "study/final_values_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

namespace moelab {
namespace {

using NamedValues = std::vector<std::pair<std::string, double>> ValPoint::*;

// What one kind of named value is called in the report.
struct ValueKind {
  NamedValues values;  // &ValPoint::sets or &ValPoint::tasks
  std::string table_title, gap_title, json_key, json_gap_key;
};

const ValueKind kSets{&ValPoint::sets, "Validation sets (final loss, mean ± std over seeds)",
                      "Validation set gaps (a - b per seed; beyond spread: |mean| > 2 standard "
                      "errors)",
                      "sets", "set_gaps"};
const ValueKind kTasks{&ValPoint::tasks, "Downstream tasks (final score, mean ± std over seeds)",
                       "Downstream gaps (a - b per seed; beyond spread: |mean| > 2 standard "
                       "errors)",
                       "tasks", "task_gaps"};

// Every name any finished run has a value for, in order of first appearance.
std::vector<std::string> value_names(const StudyReport& report, NamedValues values) {
  std::vector<std::string> names;
  for (const auto& r : report.runs) {
    if (!r.done) continue;
    for (const auto& p : r.curve) {
      for (const auto& [name, value] : p.*values) {
        if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
      }
    }
  }
  return names;
}

// A finished run's last value of `name`.
std::optional<double> final_value(const RunResult& run, NamedValues values,
                                  const std::string& name) {
  std::optional<double> last;
  for (const auto& p : run.curve) {
    for (const auto& [n, value] : p.*values) {
      if (n == name) last = value;
    }
  }
  return last;
}

const RunResult* finished_run(const StudyReport& report, const std::string& variant, int64_t seed) {
  for (const auto& r : report.runs) {
    if (r.variant == variant && r.seed == seed && r.done) return &r;
  }
  return nullptr;
}

MeanStd variant_value(const StudyReport& report, const std::string& variant, NamedValues values,
                      const std::string& name) {
  std::vector<double> finals;
  for (const auto& r : report.runs) {
    if (r.variant != variant || !r.done) continue;
    if (const auto v = final_value(r, values, name)) finals.push_back(*v);
  }
  return mean_std(finals);
}

// value(a) - value(b) over the seeds where both finished with a value.
MeanStd pair_gap(const StudyReport& report, const VariantPair& pair, NamedValues values,
                 const std::string& name) {
  std::vector<double> gaps;
  for (int64_t seed : report.plan.seeds) {
    const RunResult* a = finished_run(report, pair.a, seed);
    const RunResult* b = finished_run(report, pair.b, seed);
    if (!a || !b) continue;
    const auto va = final_value(*a, values, name), vb = final_value(*b, values, name);
    if (va && vb) gaps.push_back(*va - *vb);
  }
  return mean_std(gaps);
}

// Whether a mean gap is more than twice its standard error from zero.
std::string beyond_spread(const MeanStd& gap) {
  if (gap.n < 2 || !gap.std) return "—";
  return std::abs(gap.mean) > 2.0 * *gap.std / std::sqrt(double(gap.n)) ? "yes" : "no";
}

std::string summary_markdown(const StudyReport& report, const ValueKind& kind) {
  const std::vector<std::string> names = value_names(report, kind.values);
  if (names.empty()) return "";
  std::string header = "| variant |", rule = "|---|";
  for (const auto& n : names) {
    header += " " + n + " |";
    rule += "---|";
  }
  std::string md = "\n## " + kind.table_title + "\n\n" + header + "\n" + rule + "\n";
  for (const auto& v : report.variants) {
    md += "| " + v.planned.name + " |";
    for (const auto& n : names)
      md += " " + format_mean_std(variant_value(report, v.planned.name, kind.values, n)) + " |";
    md += "\n";
  }
  if (report.pairs.empty()) return md;
  md += "\n## " + kind.gap_title +
        "\n\n| gap | name | n | mean ± std | beyond spread |\n|---|---|---|---|---|\n";
  for (const auto& p : report.pairs) {
    for (const auto& n : names) {
      const MeanStd gap = pair_gap(report, p.pair, kind.values, n);
      md += fmt::format("| {} | {} | {} | {} | {} |\n", p.pair.label(), n, gap.n,
                        format_mean_std(gap), beyond_spread(gap));
    }
  }
  return md;
}

nlohmann::json summary_json(const StudyReport& report, const ValueKind& kind) {
  const std::vector<std::string> names = value_names(report, kind.values);
  nlohmann::json variants = nlohmann::json::object(), gaps = nlohmann::json::object();
  for (const auto& v : report.variants) {
    for (const auto& n : names)
      variants[v.planned.name][n] =
          mean_std_json(variant_value(report, v.planned.name, kind.values, n));
  }
  for (const auto& p : report.pairs) {
    for (const auto& n : names)
      gaps[p.pair.label()][n] = mean_std_json(pair_gap(report, p.pair, kind.values, n));
  }
  return {{kind.json_key, variants}, {kind.json_gap_key, gaps}};
}

}  // namespace

std::string set_summary_markdown(const StudyReport& report) {
  return summary_markdown(report, kSets);
}

std::string task_summary_markdown(const StudyReport& report) {
  return summary_markdown(report, kTasks);
}

std::string task_curves_csv(const StudyReport& report) {
  return named_curves_csv(report, &ValPoint::tasks, "task", "value");
}

nlohmann::json final_values_json(const StudyReport& report) {
  nlohmann::json j = summary_json(report, kSets);
  j.update(summary_json(report, kTasks));
  return j;
}

}  // namespace moelab
