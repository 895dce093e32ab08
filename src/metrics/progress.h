// Training progress for a person watching: on a terminal one line redrawn in place
// (carriage return) with a bar and ETA; otherwise (a log file, a batch job) plain
// log lines every few steps, since a redrawn line turns into garbage in a file.
#pragma once

#include <cstdint>
#include <string>

#include "config/choices.h"
#include "util/stopwatch.h"

namespace moelab {

// cfg.log.progress as shown: kAuto is a bar when stderr is a terminal, plain
// lines otherwise; the other modes are kept.
ProgressMode resolve_progress_mode(ProgressMode setting);

// "45s", "12m05s", "3h07m" (whole seconds; "--" when not finite or negative).
std::string format_duration(double seconds);

// Seconds left: the mean time per step so far times the steps left; infinity
// before any step has finished.
double eta_seconds(int64_t steps_done, int64_t steps_left, double elapsed_s);

// "step 120/1000 [##----------------] 12.0% loss 3.4521 lr 3.00e-03 12.3k tok/s ETA 2m05s"
std::string format_progress_line(int64_t step, int64_t total_steps, double loss,
                                 double tokens_per_s, double lr, double eta_s);

class Progress {
 public:
  // mode: cfg.log.progress (see resolve_progress_mode). plain_every: steps
  // between plain lines (cfg.log.interval); the last step always prints.
  Progress(int64_t total_steps, ProgressMode mode, int64_t plain_every = 10);
  ~Progress() { finish(); }
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // `step` is the number of updates done. The ETA counts from the first update
  // seen, so a resumed run estimates from its own speed.
  void update(int64_t step, double loss, double tokens_per_s, double lr);
  // Ends the redrawn line so later output starts on a fresh one; idempotent.
  void finish();

 private:
  int64_t total_steps_;
  ProgressMode mode_;
  int64_t plain_every_;
  int64_t first_step_ = -1;
  Stopwatch since_first_;
  bool line_open_ = false;
};

}  // namespace moelab
