// Error types that map to the CLI's exit codes (src/cli/run_cli.cpp, the one
// place that maps them): InputError (bad usage, config or input data) exits 2;
// StoppedForResume exits kExitStoppedForResume on every rank; anything else
// that escapes (SystemError among them) exits 1.
#pragma once

#include <stdexcept>
#include <string>

namespace moelab {

class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The system refused what a run needs (a full disk, a quota, an I/O error):
// exits 1 like an internal failure, but is reported as what it is.
class SystemError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A run that stopped before its end on purpose (a stop signal) after saving a
// checkpoint: every rank exits with this status, which the sbatch templates
// turn into a requeue; `--resume auto` continues the run.
constexpr int kExitStoppedForResume = 3;

class StoppedForResume : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The exit status for an exception that escaped a command.
inline int exit_code_of(const std::exception& e) {
  if (dynamic_cast<const StoppedForResume*>(&e)) return kExitStoppedForResume;
  if (dynamic_cast<const InputError*>(&e)) return 2;
  return 1;
}

}  // namespace moelab
