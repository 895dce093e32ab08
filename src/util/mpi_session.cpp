#include "util/mpi_session.h"

#include <mpi.h>

#include <cstdlib>
#include <string>
#include <vector>

extern char** environ;

namespace moelab {
namespace {
bool mpi_ready() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized && !finalized;
}
}  // namespace

MpiSession::MpiSession(int* argc, char*** argv) {
  if (mpi_ready()) return;
  int provided = 0;
  // The data loader's prefetch thread never calls MPI, so FUNNELED is enough.
  MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
  // Errors in collectives come back as codes we turn into exceptions, not aborts.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
}

MpiSession::~MpiSession() {
  if (mpi_ready()) MPI_Finalize();
}

int MpiSession::rank() {
  if (!mpi_ready()) return 0;
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

int MpiSession::size() {
  if (!mpi_ready()) return 1;
  int s = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

void MpiSession::abort(int exit_code) {
  if (mpi_ready() && size() > 1) MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::exit(exit_code);
}

bool is_mpi_launch_variable(std::string_view name) {
  auto starts = [&](std::string_view prefix) { return name.substr(0, prefix.size()) == prefix; };
  if (starts("PMIX_") || starts("ORTE_")) return true;
  if (!starts("OMPI_")) return false;
  if (!starts("OMPI_MCA_")) return true;
  return starts("OMPI_MCA_ess") || starts("OMPI_MCA_orte_") || starts("OMPI_MCA_pmix");
}

void forget_mpi_launch() {
  std::vector<std::string> names;
  for (char** e = environ; *e; ++e) {
    const std::string_view entry(*e);
    const std::string_view name = entry.substr(0, entry.find('='));
    if (is_mpi_launch_variable(name)) names.emplace_back(name);
  }
  for (const auto& n : names) unsetenv(n.c_str());
}

}  // namespace moelab
