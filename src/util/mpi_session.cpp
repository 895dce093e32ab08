#include "util/mpi_session.h"

#include <mpi.h>

#include <cstdlib>

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

}  // namespace moelab
