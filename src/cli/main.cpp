// moelab: one binary, one subcommand per job. Exit codes: 0 ok, 2 bad usage,
// config or input, 1 internal failure, 3 stopped on a signal with a checkpoint
// saved (requeue and resume). Under mpirun a failure on any rank ends
// every rank, so no rank is left waiting in a collective.
#include <spdlog/spdlog.h>

#include <optional>
#include <string_view>

#include "cli/commands.h"
#include "util/allocator.h"
#include "util/error.h"
#include "util/log.h"
#include "util/mpi_session.h"

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

int main(int argc, char** argv) {
  if (runs_steps(argc, argv)) {
    moelab::keep_freed_memory();
  } else {
    moelab::give_back_freed_memory();
  }
  std::optional<moelab::MpiSession> mpi;
  if (runs_as_rank(argc, argv)) {
    mpi.emplace(&argc, &argv);
  } else {
    moelab::forget_mpi_launch();
  }
  moelab::init_logging(moelab::MpiSession::rank());

  CLI::App app{"moelab: train and compare dense and mixture-of-experts language models"};
  app.require_subcommand(1);
  moelab::add_config_command(app);
  moelab::add_params_command(app);
  moelab::add_prep_command(app);
  moelab::add_train_command(app);
  moelab::add_eval_command(app);
  moelab::add_tasks_command(app);
  moelab::add_study_command(app);
  moelab::add_report_command(app);
  moelab::add_upcycle_command(app);
  moelab::add_convert_command(app);
  moelab::add_export_command(app);
  moelab::add_import_command(app);

  int code = 0;
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    code = app.exit(e);
    if (code != 0) code = 2;
  } catch (const std::exception& e) {
    code = moelab::exit_code_of(e);
    if (code == moelab::kExitStoppedForResume) {
      spdlog::warn("{}", e.what());
      return code;  // every rank stops here together: nothing to abort
    }
    if (code == 2) {
      spdlog::error("{}", e.what());
    } else {
      spdlog::error("internal error: {}", e.what());
    }
  }
  if (code != 0 && moelab::MpiSession::size() > 1) moelab::MpiSession::abort(code);
  return code;
}
