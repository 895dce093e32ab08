// `moelab study plan|run|submit FILE`: a study file (variants x seeds, see
// docs/studies.md) planned, run locally, or submitted to Slurm. The work lives
// in moelab_study; this file maps flags and prints.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <sstream>

#include "cli/commands.h"
#include "comm/cuda_device.h"
#include "study/local_launcher.h"
#include "study/report.h"
#include "study/slurm_scripts.h"
#include "study/study_plan.h"
#include "study/study_spec.h"
#include "study/support_files.h"
#include "study/train_command.h"
#include "util/mpi_session.h"

namespace moelab {
namespace {

struct StudyOptions {
  std::string file;
  int64_t parallel = 0;
  bool dry_run = false;
  bool no_plots = false;
  std::string partition;
  std::string account;
  std::string time;
};

int64_t expert_parallel_size(const StudyPlan& plan, const std::string& variant) {
  for (const auto& run : plan.runs) {
    if (run.variant == variant) return run.cfg.parallel.ep;
  }
  return 1;
}

// Wide enough for every variant name.
size_t name_width(const StudyPlan& plan) {
  size_t width = 16;
  for (const auto& v : plan.variants) width = std::max(width, v.name.size());
  return width;
}

// The grid (variants with axis values): one row per variant, one column per axis.
void print_grid(const StudyPlan& plan) {
  const size_t w = name_width(plan);
  std::cout << "\ngrid over";
  for (const auto& axis : plan.axes) std::cout << " " << axis;
  std::cout << fmt::format("\n{:<{}}", "variant", w);
  for (const auto& axis : plan.axes) std::cout << fmt::format(" {:>16}", axis);
  std::cout << fmt::format(" {:>12} {:>12} {:>14}\n", "total", "active", "FLOPs/token");
  for (const auto& v : plan.variants) {
    if (v.point.empty()) continue;
    std::cout << fmt::format("{:<{}}", v.name, w);
    for (const auto& [axis, label] : v.point) std::cout << fmt::format(" {:>16}", label);
    std::cout << fmt::format(" {:>12} {:>12} {:>14.4g}\n", v.total_params, v.active_params,
                             v.flops_per_token);
  }
}

// A staged study's order: each variant's stage and start, and the tokens and
// FLOPs its runs train themselves and inherit from their parents' chain.
void print_stages(const StudyPlan& plan) {
  int64_t last_stage = 0;
  for (const auto& v : plan.variants) last_stage = std::max(last_stage, v.stage);
  if (last_stage == 0) return;
  const size_t w = name_width(plan);
  std::cout << fmt::format(
      "\nstages (a run starts once its parent's run of the same seed has finished; "
      "per run):\n{:>5} {:<{}} {:<{}} {:>7} {:>8} {:>12} {:>12} {:>11} {:>11} {:>11}\n",
      "stage", "variant", w, "from", w, "step", "convert", "tokens", "inherited", "FLOPs",
      "inherited", "total");
  for (int64_t stage = 0; stage <= last_stage; ++stage) {
    for (const auto& v : plan.variants) {
      if (v.stage != stage) continue;
      std::cout << fmt::format(
          "{:>5} {:<{}} {:<{}} {:>7} {:>8} {:>12} {:>12} {:>11.4g} {:>11.4g} {:>11.4g}\n", stage,
          v.name, w, v.parent.empty() ? "-" : v.parent, w,
          v.parent.empty() ? "-" : std::to_string(v.from_step), v.convert.empty() ? "-" : v.convert,
          v.tokens, v.inherited_tokens, v.own_flops(), v.inherited_flops,
          v.own_flops() + v.inherited_flops);
    }
  }
}

void print_plan(const StudyPlan& plan) {
  std::cout << fmt::format("study '{}': {} variants x {} seeds = {} runs in {}\n\n", plan.name,
                           plan.variants.size(), plan.seeds.size(), plan.runs.size(),
                           plan.out_root);
  const size_t w = name_width(plan);
  std::cout << fmt::format("{:<{}} {:>5} {:>12} {:>12} {:>11} {:>7} {:>12}  {}\n", "variant", w,
                           "seed", "total", "active", "FLOPs/tok", "steps", "tokens",
                           "command (run dir = config's folder)");
  const std::string binary = current_executable();
  for (const auto& run : plan.runs) {
    const PlannedVariant& v = planned_variant(plan, run.variant);
    const auto start = start_command(run, binary);
    std::cout << fmt::format("{:<{}} {:>5} {:>12} {:>12} {:>11.4g} {:>7} {:>12}  {}{}\n", v.name, w,
                             run.seed, v.total_params, v.active_params, v.flops_per_token,
                             run.cfg.train.max_steps, v.tokens,
                             start.empty() ? "" : shell_join(start) + " && ",
                             shell_join(train_command(run, plan.ranks, binary)));
  }
  print_stages(plan);
  for (const auto& v : plan.variants) {
    if (!v.match) continue;
    std::cout << fmt::format(
        "\n{}: {}, {} matched to the {} parameters of '{}': target {}, achieved {} "
        "(mismatch {:+.3f}%)",
        v.name, v.moe ? "MoE" : "dense", v.match->knob, v.match->target, v.match->variant,
        v.match->target_params, v.match->dense_total, 100.0 * v.match->mismatch);
    const int64_t ep = expert_parallel_size(plan, v.match->variant);
    if (ep > 1) {
      std::cout << fmt::format("; parallel.ep = {} of '{}' dropped: all {} ranks data parallel", ep,
                               v.match->variant, plan.ranks);
    }
  }
  std::cout << "\n";
  if (!plan.axes.empty()) print_grid(plan);
}

// The ids a child's CUDA_VISIBLE_DEVICES may name: this process's own list
// when it has one (a Slurm job's GPUs), else 0..n-1 over the GPUs it sees.
std::vector<std::string> visible_gpu_ids() {
  std::vector<std::string> ids;
  if (const char* list = std::getenv("CUDA_VISIBLE_DEVICES")) {
    std::stringstream in(list);
    for (std::string id; std::getline(in, id, ',');) {
      if (!id.empty()) ids.push_back(id);
    }
    return ids;
  }
  for (int g = 0; g < visible_cuda_devices(); ++g) ids.push_back(std::to_string(g));
  return ids;
}

void run_study(const StudyOptions& o) {
  const StudySpec spec = load_study(o.file);
  const StudyPlan plan = plan_study(spec);
  prepare_out_root(plan);
  const int64_t parallel = o.parallel > 0 ? o.parallel : spec.parallel_runs;
  const auto outcomes = run_study_locally(plan, parallel, current_executable(), visible_gpu_ids());
  write_study_report(plan, plan.out_root, !o.no_plots);
  size_t failed = 0, not_started = 0;
  for (const auto& r : outcomes) {
    if (r.status == LocalRunOutcome::Status::kFailed) {
      ++failed;
      spdlog::error("failed: {} seed {} ({})", r.variant, r.seed, r.detail);
    } else if (r.status == LocalRunOutcome::Status::kNotStarted) {
      ++not_started;
      spdlog::error("{} seed {}: {}", r.variant, r.seed, r.detail);
    }
  }
  if (failed + not_started > 0) {
    throw std::runtime_error(
        fmt::format("{} of {} runs failed and {} were not started as their "
                    "parent runs did not finish (listed above)",
                    failed, outcomes.size(), not_started));
  }
}

void submit_study(const StudyOptions& o) {
  StudySpec spec = load_study(o.file);
  if (!o.partition.empty()) spec.slurm.partition = o.partition;
  if (!o.account.empty()) spec.slurm.account = o.account;
  if (!o.time.empty()) spec.slurm.time = o.time;
  const StudyPlan plan = plan_study(spec);
  prepare_out_root(plan);
  const std::string templates =
      std::filesystem::path(find_support_file("slurm/study-variant.sbatch.in")).parent_path();
  const auto scripts = write_slurm_scripts(plan, spec.slurm, templates, current_executable());
  for (const auto& s : scripts) spdlog::info("wrote {}", s.path);
  if (o.dry_run) {
    spdlog::info("--dry-run: nothing submitted");
    return;
  }
  const auto ids = submit_slurm_scripts(scripts);
  std::cout << "report job " << ids.back() << " runs after jobs";
  for (size_t i = 0; i + 1 < ids.size(); ++i) std::cout << " " << ids[i];
  std::cout << "\n";
}

}  // namespace

void add_study_command(CLI::App& root) {
  auto* cmd = root.add_subcommand("study", "Plan, run or submit a study (variants x seeds)");
  cmd->require_subcommand(1);
  auto opts = std::make_shared<StudyOptions>();
  auto* plan = cmd->add_subcommand("plan", "Print every run of a study without running anything");
  plan->add_option("file", opts->file, "Study TOML")->required();
  plan->callback([opts] {
    const StudyPlan p = plan_study(load_study(opts->file));
    check_out_root(p);
    if (MpiSession::rank() == 0) print_plan(p);
  });
  auto* run = cmd->add_subcommand(
      "run", "Run every (variant, seed) here, skipping finished runs, then write the report");
  run->add_option("file", opts->file, "Study TOML")->required();
  run->add_option("--parallel", opts->parallel, "Runs at a time (default: study.parallel_runs)")
      ->check(CLI::PositiveNumber);
  run->add_flag("--no-plots", opts->no_plots, "Write the report tables only");
  run->callback([opts] { run_study(*opts); });
  auto* submit = cmd->add_subcommand(
      "submit", "Write one sbatch job array per variant and a dependent report job; submit them");
  submit->add_option("file", opts->file, "Study TOML")->required();
  submit->add_flag("--dry-run", opts->dry_run, "Write the scripts without submitting");
  submit->add_option("--partition", opts->partition, "Slurm partition (overrides [slurm])");
  submit->add_option("--account", opts->account, "Slurm account (overrides [slurm])");
  submit->add_option("--time", opts->time, "Time limit per run, e.g. 02:00:00");
  submit->callback([opts] { submit_study(*opts); });
}

}  // namespace moelab
