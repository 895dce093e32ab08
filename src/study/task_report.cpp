#include "study/task_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

namespace moelab {
namespace {

// Every task column any finished run scored, in order of first appearance.
std::vector<std::string> task_columns(const StudyReport& report) {
  std::vector<std::string> columns;
  for (const auto& r : report.runs) {
    if (!r.done) continue;
    for (const auto& p : r.curve) {
      for (const auto& [column, value] : p.tasks) {
        if (std::find(columns.begin(), columns.end(), column) == columns.end()) {
          columns.push_back(column);
        }
      }
    }
  }
  return columns;
}

// A finished run's last score in `column`.
std::optional<double> final_score(const RunResult& run, const std::string& column) {
  std::optional<double> last;
  for (const auto& p : run.curve) {
    for (const auto& [c, value] : p.tasks) {
      if (c == column) last = value;
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

MeanStd variant_score(const StudyReport& report, const std::string& variant,
                      const std::string& column) {
  std::vector<double> values;
  for (const auto& r : report.runs) {
    if (r.variant != variant || !r.done) continue;
    if (const auto v = final_score(r, column)) values.push_back(*v);
  }
  return mean_std(values);
}

// score(a) - score(b) over the seeds where both finished with a score.
MeanStd pair_gap(const StudyReport& report, const VariantPair& pair, const std::string& column) {
  std::vector<double> gaps;
  for (int64_t seed : report.plan.seeds) {
    const RunResult* a = finished_run(report, pair.a, seed);
    const RunResult* b = finished_run(report, pair.b, seed);
    if (!a || !b) continue;
    const auto sa = final_score(*a, column), sb = final_score(*b, column);
    if (sa && sb) gaps.push_back(*sa - *sb);
  }
  return mean_std(gaps);
}

// Whether a mean gap is more than twice its standard error from zero.
std::string beyond_spread(const MeanStd& gap) {
  if (gap.n < 2 || !gap.std) return "—";
  return std::abs(gap.mean) > 2.0 * *gap.std / std::sqrt(double(gap.n)) ? "yes" : "no";
}

}  // namespace

std::string task_summary_markdown(const StudyReport& report) {
  const std::vector<std::string> columns = task_columns(report);
  if (columns.empty()) return "";
  std::string header = "| variant |", rule = "|---|";
  for (const auto& c : columns) {
    header += " " + c + " |";
    rule += "---|";
  }
  std::string md = "\n## Downstream tasks (final score, mean ± std over seeds)\n\n" + header +
                   "\n" + rule + "\n";
  for (const auto& v : report.variants) {
    md += "| " + v.planned.name + " |";
    for (const auto& c : columns)
      md += " " + format_mean_std(variant_score(report, v.planned.name, c)) + " |";
    md += "\n";
  }
  if (report.pairs.empty()) return md;
  md +=
      "\n## Downstream gaps (a - b per seed; beyond spread: |mean| > 2 standard errors)\n\n"
      "| gap | task | n | mean ± std | beyond spread |\n|---|---|---|---|---|\n";
  for (const auto& p : report.pairs) {
    for (const auto& c : columns) {
      const MeanStd gap = pair_gap(report, p.pair, c);
      md += fmt::format("| {} | {} | {} | {} | {} |\n", p.pair.label(), c, gap.n,
                        format_mean_std(gap), beyond_spread(gap));
    }
  }
  return md;
}

std::string task_curves_csv(const StudyReport& report) {
  return named_curves_csv(report, &ValPoint::tasks, "task", "value");
}

nlohmann::json task_summary_json(const StudyReport& report) {
  const std::vector<std::string> columns = task_columns(report);
  nlohmann::json variants = nlohmann::json::object(), gaps = nlohmann::json::object();
  for (const auto& v : report.variants) {
    for (const auto& c : columns)
      variants[v.planned.name][c] = mean_std_json(variant_score(report, v.planned.name, c));
  }
  for (const auto& p : report.pairs) {
    for (const auto& c : columns)
      gaps[p.pair.label()][c] = mean_std_json(pair_gap(report, p.pair, c));
  }
  return {{"tasks", variants}, {"task_gaps", gaps}};
}

}  // namespace moelab
