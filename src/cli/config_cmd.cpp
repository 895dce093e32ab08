// `moelab config show FILE`: the fully resolved config, after defaults and --set.
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "config/load.h"
#include "util/mpi_session.h"

namespace moelab {

void add_config_command(CLI::App& root) {
  auto* cmd = root.add_subcommand("config", "Inspect configs");
  cmd->require_subcommand(1);
  struct Options {
    std::string file;
    std::vector<std::string> overrides;
  };
  auto opts = std::make_shared<Options>();
  auto* show = cmd->add_subcommand("show", "Print the fully resolved config (defaults filled in)");
  show->add_option("file", opts->file, "TOML config")->required();
  show->add_option("--set", opts->overrides, "Override a key: --set model.d_model=256");
  show->callback([opts] {
    Config cfg = load_config(opts->file, opts->overrides, MpiSession::size());
    if (MpiSession::rank() == 0) std::cout << to_toml(cfg);
  });
  auto* defaults = cmd->add_subcommand("defaults", "Print every key with its default value");
  defaults->callback([] {
    if (MpiSession::rank() == 0) std::cout << to_toml(Config{});
  });
}

}  // namespace moelab
