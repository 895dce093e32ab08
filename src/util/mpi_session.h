// MPI for the whole process: initialised once in main() (a plain `moelab ...`
// without mpirun runs as a world of one), finalised on exit.
#pragma once

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

}  // namespace moelab
