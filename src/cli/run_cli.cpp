#include "cli/run_cli.h"

#include <spdlog/spdlog.h>

#include <optional>
#include <string_view>

#include "cli/commands.h"
#include "util/allocator.h"
#include "util/error.h"
#include "util/log.h"
#include "util/mpi_session.h"

namespace moelab {
namespace {

// `study` and `report` start jobs (mpirun, sbatch) and `params` only counts:
// none of them is ever a rank, and a process that initialised MPI would hand
// its launch variables down to every job it starts.
bool runs_as_rank(int argc, char** argv) {
  if (argc < 2) return true;
  const std::string_view command = argv[1];
  return command != "study" && command != "report" && command != "params";
}

// Commands that run steps over and over keep freed memory for the next step;
// the others give it back (util/allocator.h).
bool runs_steps(int argc, char** argv) {
  if (argc < 2) return false;
  const std::string_view command = argv[1];
  return command == "train" || command == "eval" || command == "convert";
}

}  // namespace

int run_cli(int argc, char** argv) {
  if (runs_steps(argc, argv)) {
    keep_freed_memory();
  } else {
    give_back_freed_memory();
  }
  std::optional<MpiSession> mpi;
  if (runs_as_rank(argc, argv)) {
    mpi.emplace(&argc, &argv);
  } else {
    forget_mpi_launch();
  }
  init_logging(MpiSession::rank());

  CLI::App app{"moelab: train and compare dense and mixture-of-experts language models"};
  app.require_subcommand(1);
  add_config_command(app);
  add_params_command(app);
  add_prep_command(app);
  add_train_command(app);
  add_eval_command(app);
  add_analyze_command(app);
  add_tasks_command(app);
  add_study_command(app);
  add_report_command(app);
  add_upcycle_command(app);
  add_convert_command(app);
  add_export_command(app);
  add_import_command(app);

  int code = 0;
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    code = app.exit(e);
    if (code != 0) code = 2;
  } catch (const std::exception& e) {
    code = exit_code_of(e);
    if (code == kExitStoppedForResume) {
      spdlog::warn("{}", e.what());
      return code;  // every rank stops here together: nothing to abort
    }
    if (code == 2 || dynamic_cast<const SystemError*>(&e)) {
      spdlog::error("{}", e.what());
    } else {
      spdlog::error("internal error: {}", e.what());
    }
  }
  if (code != 0 && MpiSession::size() > 1) MpiSession::abort(code);
  return code;
}

}  // namespace moelab
