#include "study/stage_report.h"

#include <fmt/format.h>

#include <vector>

namespace moelab {
namespace {

bool has_stages(const StudyReport& report) {
  for (const auto& v : report.plan.variants)
    if (!v.parent.empty()) return true;
  return false;
}

RunCost own_cost(const StudyReport& report, const RunResult& run, double fraction) {
  const double tokens = double(run.done->tokens) * fraction;
  return {tokens, tokens * planned_variant(report.plan, run.variant).flops_per_token,
          run.done->wall_seconds * fraction};
}

// The cost of each variant's runs, mean ± std over the runs whose cost is known.
struct VariantCost {
  MeanStd tokens, flops, wall_seconds;
};

VariantCost variant_cost(const StudyReport& report, const std::string& variant, bool with_parents) {
  std::vector<double> tokens, flops, wall;
  for (const auto& r : report.runs) {
    if (r.variant != variant) continue;
    const auto cost = run_cost(report, r, with_parents);
    if (!cost) continue;
    tokens.push_back(cost->tokens);
    flops.push_back(cost->flops);
    wall.push_back(cost->wall_seconds);
  }
  return {mean_std(tokens), mean_std(flops), mean_std(wall)};
}

nlohmann::json cost_json(const VariantCost& c) {
  return {{"tokens", mean_std_json(c.tokens)},
          {"flops", mean_std_json(c.flops)},
          {"wall_seconds", mean_std_json(c.wall_seconds)}};
}

std::string mean_g(const MeanStd& m) {
  return m.n == 0 ? "—" : fmt::format("{:.4g}", m.mean);
}

}  // namespace

std::optional<RunCost> run_cost(const StudyReport& report, const RunResult& run,
                                bool with_parents) {
  if (!run.done) return std::nullopt;
  RunCost cost = own_cost(report, run, 1.0);
  const PlannedVariant* v = &planned_variant(report.plan, run.variant);
  const RunResult* child = &run;
  while (with_parents && !v->parent.empty()) {
    const RunResult* parent = find_run(report.runs, v->parent, child->seed);
    if (!parent || !parent->done || parent->done->steps <= 0) return std::nullopt;
    const RunCost part =
        own_cost(report, *parent, double(v->from_step) / double(parent->done->steps));
    cost.tokens += part.tokens;
    cost.flops += part.flops;
    cost.wall_seconds += part.wall_seconds;
    v = &planned_variant(report.plan, v->parent);
    child = parent;
  }
  return cost;
}

std::string stage_summary_markdown(const StudyReport& report) {
  if (!has_stages(report)) return "";
  std::string md =
      "\n## Cost with the parents' chain\n\n"
      "A staged variant's runs start from their parent's run of the same seed; \"total\" adds "
      "what the chain of parents trained up to each start (their wall time pro rata to "
      "steps). Means over the runs whose whole chain finished.\n\n"
      "| variant | stage | starts from | best val loss | tokens | total tokens | FLOPs | total "
      "FLOPs | wall s | total wall s |\n|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& s : report.variants) {
    const PlannedVariant& v = s.planned;
    const VariantCost own = variant_cost(report, v.name, false);
    const VariantCost total = variant_cost(report, v.name, true);
    const std::string from = v.parent.empty()
                                 ? "-"
                                 : fmt::format("{} step {}{}", v.parent, v.from_step,
                                               v.convert.empty() ? "" : ", " + v.convert);
    md += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n", v.name, v.stage,
                      from, format_mean_std(s.best_val_loss), mean_g(own.tokens),
                      mean_g(total.tokens), mean_g(own.flops), mean_g(total.flops),
                      format_mean_std(own.wall_seconds, 1), format_mean_std(total.wall_seconds, 1));
  }
  return md;
}

nlohmann::json stage_summary_json(const StudyReport& report) {
  nlohmann::json j = nlohmann::json::object();
  if (!has_stages(report)) return j;
  j["stages"] = nlohmann::json::array();
  for (const auto& v : report.plan.variants) {
    j["stages"].push_back({{"variant", v.name},
                           {"stage", v.stage},
                           {"parent", v.parent},
                           {"from_step", v.from_step},
                           {"convert", v.convert},
                           {"own", cost_json(variant_cost(report, v.name, false))},
                           {"total", cost_json(variant_cost(report, v.name, true))}});
  }
  return j;
}

}  // namespace moelab
