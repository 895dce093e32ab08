// Preemption and time limits: SIGTERM (what Slurm sends before a kill at the
// time limit or on preemption) and SIGUSR1 (the warning `sbatch
// --signal=USR1@SECONDS` asks for) make the run stop at the next step boundary
// with a checkpoint, instead of dying mid-step. The handler only sets a flag;
// the trainer agrees on it across ranks (a signal seen by one rank stops every
// rank at the same step).
#pragma once

namespace moelab {

// Installs the handlers for SIGTERM and SIGUSR1 while an instance lives, and
// restores the previous ones after.
class StopSignals {
 public:
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // Whether a stop signal arrived since construction; its number, or 0.
  static int received();
};

}  // namespace moelab
