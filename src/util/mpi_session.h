// MPI for the whole process: initialised once in main() by the commands that
// run as ranks (a plain `moelab train ...` without mpirun is a world of one),
// finalised on exit. Commands that start jobs of their own (study, report)
// never initialise it: see forget_mpi_launch.
#pragma once

#include <string_view>

namespace moelab {

class MpiSession {
 public:
  MpiSession(int* argc, char*** argv);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  // Valid after construction; 0 and 1 when MPI was never initialised (unit tests).
  static int rank();
  static int size();
  // Ends every rank of the job at once, so no rank waits forever in a collective.
  [[noreturn]] static void abort(int exit_code);
};

// True for a variable by which an MPI launcher (mpirun, srun --mpi=pmix, or
// Open MPI's start of a singleton) tells a process which job it belongs to:
// PMIX_*, ORTE_*, and OMPI_* except the user's own tunables OMPI_MCA_* (those
// naming the launch itself, OMPI_MCA_ess*, OMPI_MCA_orte_* and OMPI_MCA_pmix*,
// count as launch variables).
bool is_mpi_launch_variable(std::string_view name);

// Unsets every launch variable in this process. A process that starts jobs
// (sbatch, mpirun) must not hand its own launch down: with Open MPI's singleton
// variables inherited (OMPI_MCA_orte_launch=1), every `srun --mpi=pmix` job
// takes Open MPI job id 0, so concurrent jobs on one node open the same
// shared-memory segments and crash or hang each other.
void forget_mpi_launch();

}  // namespace moelab
