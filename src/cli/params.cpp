// `moelab params CONFIG [--set k=v ...] [--match active|total] [--knob d_ff|d_model]
// [--activation-rate R [--experts E]] [--write FILE]`: parameter counts by
// component, the dense config that matches an MoE config's active or total
// count, or the MoE at activation rate R matching the config's total.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "config/load.h"
#include "config/param_count.h"
#include "util/atomic_file.h"
#include "util/error.h"

namespace moelab {
namespace {

struct ParamsOptions {
  std::string config_path;
  std::vector<std::string> overrides;
  std::string match;
  std::string knob = "d_ff";
  double activation_rate = 0;
  int64_t experts = 0;
  std::string write_path;
};

void print_counts(const std::string& title, const ParamCounts& c) {
  fmt::print("{}\n", title);
  auto row = [](const char* name, int64_t n) { fmt::print("  {:<16} {:>14L}\n", name, n); };
  row("embedding", c.embedding);
  row("attention", c.attention);
  row("norms", c.norms);
  if (c.dense_ffn > 0) row("dense_ffn", c.dense_ffn);
  if (c.experts_total > 0) {
    row("router", c.router);
    row("experts_total", c.experts_total);
    row("experts_active", c.experts_active);
    row("shared_experts", c.shared_experts);
  }
  row("head", c.head);
  row("total", c.total);
  row("active", c.active);
  if (c.mtp > 0) row("mtp (training)", c.mtp);
}

void run_params(const ParamsOptions& opt) {
  const Config cfg = load_config(opt.config_path, opt.overrides);
  print_counts(opt.config_path + (cfg.moe.enabled ? " (MoE)" : " (dense)"), count_params(cfg));
  if (opt.match.empty()) {
    if (!opt.write_path.empty()) throw InputError("params --write needs --match active|total");
    return;
  }
  if (opt.activation_rate > 0) {
    if (opt.match != "total") throw InputError("params --activation-rate needs --match total");
    // The MoE at this rate with the config's total size (typically a dense config).
    const int64_t experts = opt.experts > 0 ? opt.experts : cfg.moe.num_experts;
    const MatchResult m =
        match_moe_total(cfg, experts, opt.activation_rate, count_params(cfg).total);
    fmt::print(
        "\nmatched MoE ({} experts, top_k {}, d_expert = {}; target total = {:L}): total {:L}, "
        "mismatch {:+.4f}%\n",
        experts, m.dense.moe.top_k, m.dense.moe.d_expert, m.target, m.dense_total,
        100.0 * m.mismatch);
    print_counts("matched MoE", count_params(m.dense));
    if (!opt.write_path.empty()) {
      write_file_atomically(opt.write_path, to_toml(m.dense));
      fmt::print("wrote {}\n", opt.write_path);
    }
    return;
  }
  if (!cfg.moe.enabled) {
    throw InputError("params --match: " + opt.config_path +
                     " is a dense config (moe.enabled = false); matching needs an MoE config");
  }
  const MatchResult m = match_dense(cfg, opt.match, opt.knob);
  fmt::print("\nmatched dense ({} = {}, target {} = {:L}): total {:L}, mismatch {:+.4f}%\n",
             opt.knob, opt.knob == "d_ff" ? m.dense.model.d_ff : m.dense.model.d_model, opt.match,
             m.target, m.dense_total, 100.0 * m.mismatch);
  print_counts("matched dense", count_params(m.dense));
  if (!opt.write_path.empty()) {
    write_file_atomically(opt.write_path, to_toml(m.dense));
    fmt::print("wrote {}\n", opt.write_path);
  }
}

}  // namespace

void add_params_command(CLI::App& root) {
  auto opt = std::make_shared<ParamsOptions>();
  auto* cmd = root.add_subcommand("params", "Count parameters; match a dense width to an MoE");
  cmd->add_option("config", opt->config_path, "Model config (TOML)")->required();
  cmd->add_option("--set", opt->overrides, "Override a config key: key.path=value (repeatable)");
  cmd->add_option("--match", opt->match, "Match a dense model to the MoE's active or total count")
      ->check(CLI::IsMember({"active", "total"}));
  cmd->add_option("--knob", opt->knob, "Dense width to solve for")
      ->check(CLI::IsMember({"d_ff", "d_model"}));
  cmd->add_option("--activation-rate", opt->activation_rate,
                  "With --match total: the MoE at top_k/num_experts = RATE with this config's "
                  "total parameters (solves moe.d_expert)")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--experts", opt->experts,
                  "With --activation-rate: experts per layer (default: moe.num_experts)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--write", opt->write_path, "Write the matched config (TOML) here");
  cmd->callback([opt] { run_params(*opt); });
}

}  // namespace moelab
