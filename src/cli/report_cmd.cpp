// `moelab report STUDY_DIR_OR_FILE`: a study's summary tables and plots, from
// the study folder's study.json (or from the study file, which names the folder).
#include <filesystem>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "study/report.h"
#include "study/study_plan.h"
#include "study/study_spec.h"
#include "util/error.h"

namespace moelab {

void add_report_command(CLI::App& root) {
  struct Options {
    std::string target;
    std::string out;
    bool no_plots = false;
    std::string x, lines;
  };
  auto opts = std::make_shared<Options>();
  auto* cmd = root.add_subcommand(
      "report", "Summarise a study: mean ± std over seeds, paired gaps, curves and plots");
  cmd->add_option("study", opts->target, "Study folder (holding study.json) or study TOML")
      ->required();
  cmd->add_option("--out", opts->out, "Write the report here (default: the study folder)");
  cmd->add_flag("--no-plots", opts->no_plots, "Write the tables only (no Python needed)");
  cmd->add_option("--x", opts->x, "Grid studies: the axis along x in axis.png");
  cmd->add_option("--lines", opts->lines,
                  "Grid studies: one line per value of this axis in axis.png");
  cmd->callback([opts] {
    namespace fs = std::filesystem;
    if (!fs::exists(opts->target)) {
      throw InputError(opts->target + ": no such study folder or file");
    }
    const StudyPlan plan = fs::is_directory(opts->target) ? read_study_manifest(opts->target)
                                                          : plan_study(load_study(opts->target));
    const StudyReport report = write_study_report(
        plan, opts->out.empty() ? plan.out_root : opts->out, !opts->no_plots, opts->x, opts->lines);
    std::cout << summary_markdown(report);
  });
}

}  // namespace moelab
