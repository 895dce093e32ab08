// `moelab analyze routing CHECKPOINT --set NAME=DATASET ...`: which experts a
// trained MoE routes each data set's tokens to (train/routing_analysis.h).
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "train/routing_analysis.h"
#include "util/mpi_session.h"

namespace moelab {

namespace {

void add_routing_command(CLI::App& analyze) {
  auto opts = std::make_shared<RoutingAnalysisOptions>();
  auto* cmd = analyze.add_subcommand(
      "routing",
      "Each data set's share of routed assignments per expert and MoE layer, and how "
      "far the sets' expert distributions are apart (Jensen-Shannon divergence)");
  cmd->add_option("checkpoint", opts->checkpoint, "checkpoint folder (run/checkpoints/step_N)")
      ->required();
  cmd->add_option("--set", opts->sets, "NAME=DATASET: a prepared dataset to route (repeatable)")
      ->required();
  cmd->add_option("--split", opts->split, "split of every dataset to route")->capture_default_str();
  cmd->add_option("--out", opts->out_dir, "folder for routing.json and the CSV files")
      ->capture_default_str();
  cmd->add_option("--batches", opts->batches, "forward passes per set (0 = every window)")
      ->capture_default_str();
  cmd->add_option("--batch-seqs", opts->batch_seqs, "sequences per forward pass")
      ->capture_default_str();
  cmd->add_option("--ep", opts->ep, "expert-parallel group size (divides the ranks)")
      ->capture_default_str();
  cmd->add_option("--top", opts->top, "top experts listed per layer and set")
      ->capture_default_str();
  cmd->callback([opts] {
    const nlohmann::json report = analyze_routing(*opts);
    if (MpiSession::rank() != 0) return;
    for (const nlohmann::json& pair : report["mean_jsd"]) {
      std::cout << "JSD(" << pair["sets"][0].get<std::string>() << ", "
                << pair["sets"][1].get<std::string>() << ") mean over MoE layers "
                << pair["jsd"].get<double>() << "\n";
    }
    std::cout << "routing analysis written to " << opts->out_dir << "\n";
  });
}

}  // namespace

void add_analyze_command(CLI::App& root) {
  auto* analyze = root.add_subcommand("analyze", "Analyse a trained model");
  analyze->require_subcommand(1);
  add_routing_command(*analyze);
}

}  // namespace moelab
