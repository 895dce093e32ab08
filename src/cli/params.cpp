// `moelab params CONFIG [--set k=v ...] [--match active|total] [--knob d_ff|d_model]
// [--write FILE]`: parameter counts by component, and the dense config that
// matches an MoE config's active or total count.
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
}

void run_params(const ParamsOptions& opt) {
  const Config cfg = load_config(opt.config_path, opt.overrides);
  print_counts(opt.config_path + (cfg.moe.enabled ? " (MoE)" : " (dense)"), count_params(cfg));
  if (opt.match.empty()) {
    if (!opt.write_path.empty()) throw InputError("params --write needs --match active|total");
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
  cmd->add_option("--write", opt->write_path, "Write the matched dense config (TOML) here");
  cmd->callback([opt] { run_params(*opt); });
}

}  // namespace moelab
