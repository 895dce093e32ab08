#include "study/report.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "study/axis_report.h"
#include "study/final_values_report.h"
#include "study/rate_report.h"
#include "study/stage_report.h"
#include "study/support_files.h"
#include "study/train_command.h"
#include "util/atomic_file.h"
#include "util/error.h"

namespace moelab {
namespace {

using nlohmann::json;

std::string millions(int64_t params) {
  return fmt::format("{:.3f}M", double(params) / 1e6);
}

// The validation-loss difference a - b at every step both runs evaluated.
std::vector<ValPoint> gap_curve(const RunResult& a, const RunResult& b) {
  std::map<int64_t, const ValPoint*> by_step;
  for (const auto& p : b.curve) by_step[p.step] = &p;
  std::vector<ValPoint> gaps;
  for (const auto& p : a.curve) {
    auto it = by_step.find(p.step);
    if (it != by_step.end()) {
      gaps.push_back({p.step, p.tokens, p.val_loss - it->second->val_loss, {}, {}});
    }
  }
  return gaps;
}

std::string curves_csv(const StudyReport& report) {
  std::string out = "variant,seed,step,tokens,val_loss\n";
  for (const auto& r : report.runs) {
    if (!r.done) continue;
    for (const auto& p : r.curve) {
      out += fmt::format("{},{},{},{},{}\n", r.variant, r.seed, p.step, p.tokens, p.val_loss);
    }
  }
  return out;
}

// Every named validation set's curve (runs with [[eval.sets]]), one row per point.
std::string set_curves_csv(const StudyReport& report) {
  return named_curves_csv(report, &ValPoint::sets, "set", "val_loss");
}

std::string gap_curves_csv(const StudyReport& report) {
  std::string out = "pair,seed,step,tokens,gap\n";
  for (const auto& pair : report.pairs) {
    for (int64_t seed : pair.seeds) {
      const auto* a = find_run(report.runs, pair.pair.a, seed);
      const auto* b = find_run(report.runs, pair.pair.b, seed);
      for (const auto& g : gap_curve(*a, *b)) {
        out +=
            fmt::format("{},{},{},{},{}\n", pair.pair.label(), seed, g.step, g.tokens, g.val_loss);
      }
    }
  }
  return out;
}

json summary_json(const StudyReport& report) {
  const StudyPlan& plan = report.plan;
  json j = {{"study", plan.name},  {"source", plan.source}, {"hash", plan.hash},
            {"seeds", plan.seeds}, {"ranks", plan.ranks},   {"threads", plan.threads}};
  j["variants"] = json::array();
  for (const auto& v : report.variants) {
    json jv = {{"name", v.planned.name},
               {"moe", v.planned.moe},
               {"n", v.best_val_loss.n},
               {"planned_runs", v.planned_runs},
               {"best_val_loss", mean_std_json(v.best_val_loss)},
               {"final_val_loss", mean_std_json(v.final_val_loss)},
               {"wall_seconds", mean_std_json(v.wall_seconds)},
               {"tokens", mean_std_json(v.tokens)},
               {"planned_tokens", v.planned.tokens},
               {"total_params", v.planned.total_params},
               {"active_params", v.planned.active_params}};
    if (v.planned.match) {
      const auto& m = *v.planned.match;
      jv["match"] = {{"variant", m.variant},
                     {"target", m.target},
                     {"knob", m.knob},
                     {"target_params", m.target_params},
                     {"dense_total", m.dense_total},
                     {"mismatch", m.mismatch}};
    }
    j["variants"].push_back(jv);
  }
  j["gaps"] = json::array();
  for (const auto& p : report.pairs) {
    j["gaps"].push_back({{"name", p.pair.label()},
                         {"a", p.pair.a},
                         {"b", p.pair.b},
                         {"seeds", p.seeds},
                         {"best_val_loss", mean_std_json(p.best_gap)},
                         {"final_val_loss", mean_std_json(p.final_gap)}});
  }
  j.update(final_values_json(report));
  j.update(stage_summary_json(report));
  j["excluded_runs"] = json::array();
  for (const auto& r : report.runs) {
    if (!r.done) {
      j["excluded_runs"].push_back(
          {{"variant", r.variant}, {"seed", r.seed}, {"dir", r.dir}, {"reason", r.problem}});
    }
  }
  return j;
}

// The first interpreter that can import matplotlib, or "" if none can.
std::string python_with_matplotlib() {
  std::vector<std::string> candidates;
  if (const char* p = std::getenv("MOELAB_PYTHON")) candidates.emplace_back(p);
  candidates.insert(candidates.end(), {"python3", "/usr/bin/python3"});
  for (const auto& py : candidates) {
    const std::string probe = shell_quote(py) + " -c 'import matplotlib, numpy' >/dev/null 2>&1";
    if (std::system(probe.c_str()) == 0) return py;
  }
  return "";
}

}  // namespace

const RunResult* find_run(const std::vector<RunResult>& runs, const std::string& variant,
                          int64_t seed) {
  for (const auto& r : runs)
    if (r.variant == variant && r.seed == seed) return &r;
  return nullptr;
}

std::string csv_number(std::optional<double> x) {
  return x ? fmt::format("{:.6g}", *x) : "";
}

std::string named_curves_csv(const StudyReport& report,
                             std::vector<std::pair<std::string, double>> ValPoint::*values,
                             const std::string& name_column, const std::string& value_column) {
  std::string out = "variant,seed," + name_column + ",step,tokens," + value_column + "\n";
  for (const auto& r : report.runs) {
    if (!r.done) continue;
    for (const auto& p : r.curve) {
      for (const auto& [name, value] : p.*values) {
        out += fmt::format("{},{},{},{},{},{}\n", r.variant, r.seed, name, p.step, p.tokens, value);
      }
    }
  }
  return out;
}

size_t StudyReport::missing() const {
  size_t n = 0;
  for (const auto& r : runs) n += r.done ? 0 : 1;
  return n;
}

StudyReport build_report(const StudyPlan& plan) {
  StudyReport report;
  report.plan = plan;
  for (const auto& run : plan.runs) {
    report.runs.push_back(read_run_result(run.variant, run.seed, run.dir));
  }
  report.axis_order = plan.axes;
  for (const auto& v : plan.variants) {
    VariantSummary s;
    s.planned = v;
    std::vector<double> best, final_loss, wall, tokens;
    for (const auto& r : report.runs) {
      if (r.variant != v.name) continue;
      ++s.planned_runs;
      if (!r.done) continue;
      best.push_back(*r.done->best_val_loss);
      // A run whose last evaluation is missing falls back to its best.
      final_loss.push_back(r.done->final_val_loss.value_or(*r.done->best_val_loss));
      wall.push_back(r.done->wall_seconds);
      tokens.push_back(double(r.done->tokens));
    }
    s.best_val_loss = mean_std(best);
    s.final_val_loss = mean_std(final_loss);
    s.wall_seconds = mean_std(wall);
    s.tokens = mean_std(tokens);
    report.variants.push_back(s);
  }
  for (const auto& pair : plan.pairs) {
    PairSummary p;
    p.pair = pair;
    std::vector<double> best, final_loss;
    for (int64_t seed : plan.seeds) {
      const auto* a = find_run(report.runs, pair.a, seed);
      const auto* b = find_run(report.runs, pair.b, seed);
      if (!a || !b || !a->done || !b->done) continue;
      p.seeds.push_back(seed);
      best.push_back(*a->done->best_val_loss - *b->done->best_val_loss);
      final_loss.push_back(a->done->final_val_loss.value_or(*a->done->best_val_loss) -
                           b->done->final_val_loss.value_or(*b->done->best_val_loss));
    }
    p.best_gap = mean_std(best);
    p.final_gap = mean_std(final_loss);
    report.pairs.push_back(p);
  }
  return report;
}

std::string summary_markdown(const StudyReport& report) {
  const StudyPlan& plan = report.plan;
  std::string seeds;
  for (int64_t s : plan.seeds) seeds += (seeds.empty() ? "" : ", ") + std::to_string(s);
  std::string md = fmt::format(
      "# Study `{}`\n\nSource `{}` (hash {}); seeds {}; {} rank(s) x {} thread(s) per run.\n"
      "Losses are mean ± sample std over the finished seeds (n of planned).\n\n",
      plan.name, plan.source, plan.hash, seeds, plan.ranks, plan.threads);
  md +=
      "## Variants\n\n"
      "| variant | n | best val loss | final val loss | total params | active params | tokens "
      "| wall s |\n|---|---|---|---|---|---|---|---|\n";
  for (const auto& v : report.variants) {
    md += fmt::format("| {} | {}/{} | {} | {} | {} | {} | {} | {} |\n", v.planned.name,
                      v.best_val_loss.n, v.planned_runs, format_mean_std(v.best_val_loss),
                      format_mean_std(v.final_val_loss), millions(v.planned.total_params),
                      millions(v.planned.active_params), v.planned.tokens,
                      format_mean_std(v.wall_seconds, 1));
  }
  bool any_match = false;
  for (const auto& v : report.variants) any_match |= bool(v.planned.match);
  if (any_match) {
    md +=
        "\n## Matched variants\n\n| variant | matches | target | knob | target params | "
        "dense params | mismatch |\n|---|---|---|---|---|---|---|\n";
    for (const auto& v : report.variants) {
      if (!v.planned.match) continue;
      const auto& m = *v.planned.match;
      md += fmt::format("| {} | {} | {} | {} | {} | {} | {:+.3f}% |\n", v.planned.name, m.variant,
                        m.target, m.knob, m.target_params, m.dense_total, 100.0 * m.mismatch);
    }
  }
  if (!report.pairs.empty()) {
    md +=
        "\n## Paired gaps (a - b per seed; negative: a is better)\n\n"
        "| gap | n | best val loss gap | final val loss gap |\n|---|---|---|---|\n";
    for (const auto& p : report.pairs) {
      md += fmt::format("| {} | {} | {} | {} |\n", p.pair.label(), p.seeds.size(),
                        format_mean_std(p.best_gap), format_mean_std(p.final_gap));
    }
  }
  md += stage_summary_markdown(report);
  md += set_summary_markdown(report);
  md += task_summary_markdown(report);
  md += axis_summary_markdown(report, report.axis_order);
  md += rate_summary_markdown(report);
  md += "\n## Missing or unfinished runs (excluded)\n\n";
  if (report.missing() == 0) md += "None: every planned run finished.\n";
  for (const auto& r : report.runs) {
    if (!r.done)
      md += fmt::format("- {} seed {}: {} (`{}`)\n", r.variant, r.seed, r.problem, r.dir);
  }
  md +=
      "\nFiles: `curves.csv`, `set_curves.csv` (each named validation set), `task_curves.csv` "
      "(each downstream task score), `gap_curves.csv`, `summary.json` (and `axis_summary.csv` "
      "for a grid, `rate_summary.csv` for an activation-rate sweep); plots `curves.png`, "
      "`gaps.png` (and `set_curves.png`, `task_curves.png`, `axis.png`, `activation_rate.png`) "
      "when matplotlib was available.\n";
  return md;
}

void write_report_tables(const StudyReport& report, const std::string& dir) {
  write_file_atomically(dir + "/curves.csv", curves_csv(report));
  write_file_atomically(dir + "/set_curves.csv", set_curves_csv(report));
  write_file_atomically(dir + "/task_curves.csv", task_curves_csv(report));
  write_file_atomically(dir + "/gap_curves.csv", gap_curves_csv(report));
  write_file_atomically(dir + "/summary.json", summary_json(report).dump(2) + "\n");
  write_file_atomically(dir + "/summary.md", summary_markdown(report));
  if (!report.axis_order.empty()) {
    write_file_atomically(dir + "/axis_summary.csv", axis_summary_csv(report, report.axis_order));
  }
  if (has_rate_sweep(report)) {
    write_file_atomically(dir + "/rate_summary.csv", rate_summary_csv(report));
  }
}

bool render_plots(const std::string& dir, const std::string& script) {
  const std::string python = python_with_matplotlib();
  if (python.empty()) {
    spdlog::warn("no python3 with matplotlib found (set MOELAB_PYTHON); skipping the plots");
    return false;
  }
  const std::string command = shell_join({python, script, dir});
  if (std::system(command.c_str()) != 0) {
    spdlog::warn("`{}` failed; the tables are written, the plots are not", command);
    return false;
  }
  return true;
}

StudyReport write_study_report(const StudyPlan& plan, const std::string& dir, bool plots,
                               const std::string& x, const std::string& lines) {
  StudyReport report = build_report(plan);
  report.axis_order = axis_order(plan, x, lines);
  write_report_tables(report, dir);
  spdlog::info("report: {}/summary.md ({} of {} runs finished)", dir,
               report.runs.size() - report.missing(), report.runs.size());
  if (!plots) return report;
  try {
    if (render_plots(dir, find_support_file("src/study/plot_study.py"))) {
      spdlog::info("plots: {}/curves.png, {}/gaps.png{}{}", dir, dir,
                   report.axis_order.empty() ? "" : ", " + dir + "/axis.png",
                   has_rate_sweep(report) ? ", " + dir + "/activation_rate.png" : "");
    }
  } catch (const InputError& e) {
    spdlog::warn("{}; skipping the plots", e.what());
  }
  return report;
}

}  // namespace moelab
