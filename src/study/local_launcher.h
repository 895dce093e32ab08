// `moelab study run`: every planned run as a child process on this machine, N at
// a time. Finished runs (a DONE file) are skipped; interrupted ones resume via
// `--resume auto`; a failed run does not stop the others. A staged run starts
// once its parent run (same seed) has finished, after writing its converted
// start if it has one; a run whose parent failed is not started.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "study/study_plan.h"

namespace moelab {

struct LocalRunOutcome {
  // kNotStarted: a staged run whose parent run failed or was not started.
  enum class Status { kSkipped, kFinished, kFailed, kNotStarted };
  std::string variant;
  int64_t seed = 0;
  Status status = Status::kSkipped;
  std::string detail;    // for failures: exit code or signal, and the log path
  std::string log_tail;  // for failures: the last lines of the run's log
};

// Runs `plan.runs` (configs already written by prepare_out_root) with `binary`
// as the moelab executable, `parallel` at a time. Each run's output goes to
// <run dir>/train.log. GPU runs on a machine whose `gpus` (CUDA_VISIBLE_DEVICES
// ids) are given instead run plan.runs_per_gpu to each group of plan.ranks
// GPUs, each seeing only its group.
std::vector<LocalRunOutcome> run_study_locally(const StudyPlan& plan, int64_t parallel,
                                               const std::string& binary,
                                               const std::vector<std::string>& gpus = {});

}  // namespace moelab
