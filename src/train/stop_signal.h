// Preemption, time limits and Ctrl-C: SIGTERM (what Slurm sends before a kill
// at the time limit or on preemption), SIGUSR1 (the warning `sbatch
// --signal=USR1@SECONDS` asks for) and a first SIGINT (Ctrl-C) make the run
// stop at the next step boundary with a checkpoint, instead of dying mid-step.
// A second Ctrl-C ends the process at once, as a person pressing it twice
// means. The handler only sets a flag; the trainer agrees on it across ranks
// (a signal seen by one rank stops every rank at the same step).
#pragma once

namespace moelab {

class StopSignals {
 public:
  // Installs the handlers and clears the flag. The SIGTERM and SIGUSR1
  // handlers stay installed until the process exits: a repeated signal that
  // arrives after the run decided to stop (Slurm may send several) must not
  // kill a rank on its way out with the requeue status. SIGINT's is one-shot.
  StopSignals();

  // The number of the last stop signal received since construction, or 0.
  static int received();
};

}  // namespace moelab
