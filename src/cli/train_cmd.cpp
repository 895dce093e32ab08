// `moelab train CONFIG`: trains one run (under mpirun: collectively on every rank).
#include <spdlog/spdlog.h>

#include <memory>

#include "cli/commands.h"
#include "config/load.h"
#include "train/run_training.h"
#include "util/error.h"
#include "util/log.h"
#include "util/mpi_session.h"

namespace moelab {

void add_train_command(CLI::App& root) {
  struct Options {
    std::string file;
    std::vector<std::string> overrides;
    std::string resume;
    std::string out;
  };
  auto opts = std::make_shared<Options>();
  auto* cmd = root.add_subcommand("train", "Train a dense or MoE model from a TOML config");
  cmd->add_option("config", opts->file, "TOML config")->required();
  cmd->add_option("--set", opts->overrides, "Override a key: --set train.max_steps=100");
  cmd->add_option(
      "--resume", opts->resume,
      "\"auto\" (newest valid checkpoint of the run), a checkpoint folder, or \"none\"");
  cmd->add_option("--out", opts->out, "Run folder (same as --set train.out_dir=...)");
  cmd->callback([opts] {
    auto overrides = opts->overrides;
    if (!opts->resume.empty()) overrides.push_back("checkpoint.resume=" + opts->resume);
    if (!opts->out.empty()) overrides.push_back("train.out_dir=" + opts->out);
    // Every rank validates the config before any collective starts.
    Config cfg = load_config(opts->file, overrides, MpiSession::size());
    set_log_level(choice_name(cfg.log.level));
    TrainSummary s = run_training(cfg);
    if (s.stopped_by_signal) {
      throw StoppedForResume("stopped on a signal at step " + std::to_string(s.steps) +
                             "; continue with --resume auto");
    }
    if (MpiSession::rank() == 0) {
      spdlog::info("done: {} steps, {} tokens, best val_loss {:.4f}, final {:.4f} -> {}", s.steps,
                   s.tokens, s.best_val_loss, s.last_val_loss, cfg.train.out_dir);
    }
    if (s.stopped_nonfinite) throw std::runtime_error("training stopped on non-finite losses");
  });
}

}  // namespace moelab
