// `moelab analyze routing CHECKPOINT|STUDY_DIR --set NAME=DATASET ...`: which
// experts a trained MoE routes each data set's tokens to
// (train/routing_analysis.h), for one checkpoint or for every MoE run of a
// study, summarised over its seeds (study/routing_summary.h).
#include <filesystem>
#include <iostream>
#include <memory>

#include "checkpoint/checkpoint_io.h"
#include "cli/commands.h"
#include "study/report.h"
#include "study/routing_summary.h"
#include "study/stats.h"
#include "study/study_plan.h"
#include "study/support_files.h"
#include "train/routing_analysis.h"
#include "util/error.h"
#include "util/mpi_session.h"

namespace moelab {

namespace {

using Json = nlohmann::json;

bool is_study_folder(const std::string& path) {
  return std::filesystem::exists(std::filesystem::path(path) / "study.json");
}

std::string newest_checkpoint(const std::string& run_dir) {
  const std::vector<std::string> folders = checkpoint_folders(run_dir);
  if (folders.empty()) {
    throw InputError("analyze routing: " + run_dir + " has no checkpoint (has the study run?)");
  }
  return folders.front();
}

// Every MoE run's newest checkpoint, each report under
// <out>/<variant>/seed<seed>, and their summary over seeds in <out>.
Json analyze_study_routing(const RoutingAnalysisOptions& opts,
                           const std::vector<std::string>& group_args) {
  const StudyPlan plan = read_study_manifest(opts.checkpoint);
  // Checked before any run is analysed.
  std::vector<std::string> set_names;
  for (const std::string& set : opts.sets) set_names.push_back(set.substr(0, set.find('=')));
  std::vector<SetGroup> groups;
  for (const std::string& arg : group_args) groups.push_back(parse_set_group(arg, set_names));
  std::vector<RunRouting> runs;
  for (const PlannedVariant& variant : plan.variants) {
    if (!variant.moe) continue;
    for (int64_t seed : plan.seeds) {
      const std::string run = variant.name + "/seed" + std::to_string(seed);
      RoutingAnalysisOptions one = opts;
      one.checkpoint = newest_checkpoint(opts.checkpoint + "/" + run);
      one.out_dir = opts.out_dir + "/" + run;
      runs.push_back({variant.name, seed, analyze_routing(one)});
    }
  }
  if (runs.empty()) {
    throw InputError("analyze routing: the study " + opts.checkpoint + " has no MoE variant");
  }
  const Json summary = summarize_routing(runs, groups);
  if (MpiSession::rank() == 0) write_routing_summary(summary, opts.out_dir);
  return summary;
}

void print_jsd(const std::string& what, const Json& pairs) {
  for (const Json& pair : pairs) {
    std::cout << what << "JSD(" << pair["sets"][0].get<std::string>() << ", "
              << pair["sets"][1].get<std::string>() << ") mean over MoE layers ";
    if (pair["jsd"].is_object()) {
      std::cout << format_mean_std(mean_std_from_json(pair["jsd"]), 6);
    } else {
      std::cout << pair["jsd"].get<double>();
    }
    std::cout << "\n";
  }
}

void print_groups(const std::string& variant, const Json& groups) {
  for (const Json& g : groups) {
    std::string sets;
    for (const Json& set : g["sets"]) sets += (sets.empty() ? "" : ", ") + set.get<std::string>();
    std::cout << variant << ": " << g["group"].get<std::string>() << " (" << sets
              << "): JSD within " << format_mean_std(mean_std_from_json(g["within"]), 4)
              << ", to the other sets " << format_mean_std(mean_std_from_json(g["outside"]), 4)
              << ", gap " << format_mean_std(mean_std_from_json(g["gap"]), 4) << "\n";
  }
}

// The heatmaps (src/study/plot_routing.py); tables stay when plotting cannot run.
void plot_routing(const std::string& dir) {
  try {
    render_plots(dir, find_support_file("src/study/plot_routing.py"));
  } catch (const InputError& e) {
    std::cerr << e.what() << "; skipping the plots\n";
  }
}

void add_routing_command(CLI::App& analyze) {
  auto opts = std::make_shared<RoutingAnalysisOptions>();
  auto* cmd = analyze.add_subcommand(
      "routing",
      "Each data set's share of routed assignments per expert and MoE layer, and how "
      "far the sets' expert distributions are apart (Jensen-Shannon divergence)");
  cmd->add_option("checkpoint", opts->checkpoint,
                  "checkpoint folder (run/checkpoints/step_N), or a study's folder (its "
                  "study.json): every MoE run's newest checkpoint, summarised over seeds")
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
  cmd->add_option("--seq-len", opts->seq_len,
                  "tokens a window (0 = the model's seq_len; an imported model's may be long)")
      ->capture_default_str();
  cmd->add_option("--dump-windows", opts->dump_windows,
                  "routing_tokens.jsonl: each set's first N windows token by token (one process)")
      ->capture_default_str();
  cmd->add_option("--ep", opts->ep, "expert-parallel group size (divides the ranks)")
      ->capture_default_str();
  cmd->add_option("--top", opts->top, "top experts listed per layer and set")
      ->capture_default_str();
  auto groups = std::make_shared<std::vector<std::string>>();
  cmd->add_option("--group", *groups,
                  "NAME=SET,SET,...: with a study, whether these sets share experts more with "
                  "each other than with the other sets, over the seeds (repeatable)");
  auto plots = std::make_shared<bool>(true);
  cmd->add_flag("!--no-plots", *plots, "write the tables only");
  cmd->callback([opts, groups, plots] {
    if (is_study_folder(opts->checkpoint)) {
      const Json summary = analyze_study_routing(*opts, *groups);
      if (MpiSession::rank() != 0) return;
      for (const Json& v : summary["variants"]) {
        print_jsd(v["variant"].get<std::string>() + ": ", v["mean_jsd"]);
        print_groups(v["variant"].get<std::string>(), v["groups"]);
      }
    } else {
      if (!groups->empty()) {
        throw InputError("--group compares sets over a study's seeds: give a study folder, not " +
                         opts->checkpoint);
      }
      const Json report = analyze_routing(*opts);
      if (MpiSession::rank() != 0) return;
      print_jsd("", report["mean_jsd"]);
    }
    if (*plots) plot_routing(opts->out_dir);
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
