// `moelab eval CHECKPOINT`: the validation loss of a saved model on any split.
#include <spdlog/spdlog.h>

#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "train/evaluate_checkpoint.h"
#include "util/mpi_session.h"

namespace moelab {

void add_eval_command(CLI::App& root) {
  auto opts = std::make_shared<EvalCheckpointOptions>();
  auto* cmd = root.add_subcommand("eval", "Evaluate a checkpoint on a prepared split");
  cmd->add_option("checkpoint", opts->checkpoint, "checkpoint folder (run/checkpoints/step_N)")
      ->required();
  cmd->add_option("--data", opts->data_dir, "prepared dataset folder (default: the run's)");
  cmd->add_option("--split", opts->split, "split to evaluate (default: the run's val split)");
  cmd->add_option("--max-windows", opts->max_windows, "windows to use (0 = all)");
  cmd->add_option("--batch-seqs", opts->batch_seqs, "sequences per forward pass");
  cmd->callback([opts] {
    EvalCheckpointResult r = evaluate_checkpoint(*opts);
    if (MpiSession::rank() == 0) {
      std::cout << "checkpoint " << opts->checkpoint << " step " << r.step << " split " << r.split
                << ": loss " << r.loss << " over " << r.tokens << " tokens\n";
    }
  });
}

}  // namespace moelab
