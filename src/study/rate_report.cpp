#include "study/rate_report.h"

#include <fmt/format.h>

#include <optional>
#include <set>

namespace moelab {
namespace {

// A dense model activates everything it has.
double rate_of(const VariantSummary& v) {
  return v.planned.moe ? v.planned.activation_rate : 1.0;
}

double trained_tokens(const VariantSummary& v) {
  return v.tokens.n > 0 ? v.tokens.mean : double(v.planned.tokens);
}

std::optional<double> epochs_of(const VariantSummary& v) {
  if (v.planned.unique_tokens <= 0) return std::nullopt;
  return trained_tokens(v) / double(v.planned.unique_tokens);
}

}  // namespace

bool has_rate_sweep(const StudyReport& report) {
  std::set<double> rates;
  for (const auto& v : report.variants) {
    if (v.planned.moe) rates.insert(v.planned.activation_rate);
  }
  return rates.size() >= 2;
}

std::string rate_summary_csv(const StudyReport& report) {
  std::string csv =
      "variant,kind,activation_rate,top_k,n,best_mean,best_std,total_params,active_params,"
      "flops_per_token,tokens,epochs\n";
  for (const auto& v : report.variants) {
    const auto& b = v.best_val_loss;
    csv += fmt::format("{},{},{:.6g},{},{},{},{},{},{},{:.6g},{:.0f},{}\n", v.planned.name,
                       v.planned.moe ? "moe" : "dense", rate_of(v), v.planned.top_k, b.n,
                       csv_number(b.n > 0 ? std::optional<double>(b.mean) : std::nullopt),
                       csv_number(b.std), v.planned.total_params, v.planned.active_params,
                       v.planned.flops_per_token, trained_tokens(v), csv_number(epochs_of(v)));
  }
  return csv;
}

std::string rate_summary_markdown(const StudyReport& report) {
  if (!has_rate_sweep(report)) return "";
  std::string md =
      "\n## Best validation loss by activation rate\n\n"
      "| variant | activation rate | top-k | total params | active params | FLOPs/token | tokens | "
      "epochs over unique data | n | best val loss |\n|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& v : report.variants) {
    const auto epochs = epochs_of(v);
    md += fmt::format("| {} | {} | {} | {} | {} | {:.3g} | {:.0f} | {} | {}/{} | {} |\n",
                      v.planned.name,
                      v.planned.moe ? fmt::format("{:.4g}", v.planned.activation_rate) : "dense",
                      v.planned.moe ? std::to_string(v.planned.top_k) : "-", v.planned.total_params,
                      v.planned.active_params, v.planned.flops_per_token, trained_tokens(v),
                      epochs ? fmt::format("{:.2f}", *epochs) : "-", v.best_val_loss.n,
                      v.planned_runs, format_mean_std(v.best_val_loss));
  }
  return md;
}

}  // namespace moelab
