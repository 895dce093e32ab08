// The command lines of one planned run, shared by `study plan` (shown) and the
// local launcher (executed): the Slurm scripts build their own launch line
// inside the job, where srun/mpirun know the allocation.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "study/study_plan.h"

namespace moelab {

// `<binary> train <run>/config.toml --resume auto`, under
// `mpirun -np R --oversubscribe [--allow-run-as-root] -x OMP_NUM_THREADS` when
// ranks > 1 (a single rank runs as a plain process: MPI starts as a world of one).
std::vector<std::string> train_command(const PlannedRun& run, int64_t ranks,
                                       const std::string& binary);

// `<binary> upcycle|convert PARENT_CKPT ... --out <run>/start`: writes a
// staged run's converted start (run.start_args; empty for other runs).
std::vector<std::string> start_command(const PlannedRun& run, const std::string& binary);

// The words joined for a POSIX shell, quoted where needed.
std::string shell_join(const std::vector<std::string>& words);
std::string shell_quote(const std::string& word);

// The running moelab executable (/proc/self/exe).
std::string current_executable();

}  // namespace moelab
