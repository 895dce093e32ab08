// Preemption and time limits: SIGTERM (what Slurm sends before a kill at the
// time limit or on preemption) and SIGUSR1 (the warning `sbatch
// --signal=USR1@SECONDS` asks for) make the run stop at the next step boundary
// with a checkpoint, instead of dying mid-step. The handler only sets a flag;
// the trainer agrees on it across ranks (a signal seen by one rank stops every
// rank at the same step).
#pragma once

namespace moelab {

class StopSignals {
 public:
  // Installs the handlers for SIGTERM and SIGUSR1 and clears the flag. They
  // stay installed until the process exits: a repeated signal that arrives
  // after the run decided to stop (Slurm may send several) must not kill a
  // rank on its way out with the requeue status.
  StopSignals();

  // The number of the last stop signal received since construction, or 0.
  static int received();
};

}  // namespace moelab
