// `moelab study run`: every planned run as a child process on this machine, N at
// a time. Finished runs (a DONE file) are skipped; interrupted ones resume via
// `--resume auto`; a failed run does not stop the others.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "study/study_plan.h"

namespace moelab {

struct LocalRunOutcome {
  enum class Status { kSkipped, kFinished, kFailed };
  std::string variant;
  int64_t seed = 0;
  Status status = Status::kSkipped;
  std::string detail;  // for failures: exit code or signal, and the log path
};

// Runs `plan.runs` (configs already written by prepare_out_root) with `binary`
// as the moelab executable. Each run's output goes to <run dir>/train.log.
std::vector<LocalRunOutcome> run_study_locally(const StudyPlan& plan, int64_t parallel,
                                               const std::string& binary);

}  // namespace moelab
