// parallel.timeout_s: a peer that stops answering (a dead node, a cut link, a
// frozen process) must end the job in bounded time, not hang it; a peer that
// is slow on purpose (writing a checkpoint, evaluating) must not. Every
// blocking collective runs inside a CollectiveScope; a watchdog thread sees one
// that has waited longer than the timeout and asks the peers' heartbeats
// (heartbeat.h) why. When every rank it waits for is alive and in a known long
// phase (LongPhase: a checkpoint write or read, an evaluation, a profiler
// export, the first step) and still making progress, it keeps waiting, up to
// that phase's own bound (parallel.checkpoint_timeout_s or
// parallel.phase_timeout_s). Otherwise it logs the operation, the step and
// which ranks have not reached it and why, and ends this process with exit code
// 1 without touching MPI (which may itself be stuck). The launcher (mpirun,
// srun) then ends the job; ranks cut off from it end through their own
// watchdog, so no rank outlives the job.
//
// Two threads: the heartbeat thread writes this rank's heartbeat and reads the
// peers' into a table (file system work, which may hang); the watchdog thread
// only reads the clock and that table, so a hung heartbeat write cannot keep
// it from ending the job on time.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "comm/heartbeat.h"

namespace moelab {

struct WatchdogOptions {
  double timeout_s = 600;
  double checkpoint_timeout_s = 3600;  // peers in checkpoint_write or checkpoint_read
  double phase_timeout_s = 3600;       // peers in the other long phases
  std::string heartbeat_dir;           // "" = no heartbeats (the message then names no ranks)
  int rank = 0;
  int world_size = 1;
};

// One watchdog per process while an instance lives (the trainer holds one).
class CollectiveWatchdog {
 public:
  explicit CollectiveWatchdog(const WatchdogOptions& options);
  ~CollectiveWatchdog();
  CollectiveWatchdog(const CollectiveWatchdog&) = delete;
  CollectiveWatchdog& operator=(const CollectiveWatchdog&) = delete;

  // Starts the heartbeat thread, when options.heartbeat_dir was empty: this
  // rank's heartbeat into `dir`, then `beat` (the run folder's lock refresh,
  // train/run_lock.h), every heartbeat_period_s.
  void start_heartbeats(const std::string& dir, std::function<void()> beat = nullptr);

  // The training step the next collectives belong to, for the message.
  static void set_step(int64_t step);
};

// How often heartbeats are written and collectives checked.
double heartbeat_period_s(double timeout_s);

// Marks a blocking collective named `op` (a string literal) while it lives.
class CollectiveScope {
 public:
  explicit CollectiveScope(const char* op);
  ~CollectiveScope();
  CollectiveScope(const CollectiveScope&) = delete;
  CollectiveScope& operator=(const CollectiveScope&) = delete;

 private:
  int64_t start_us_;
};

// Microseconds this process has spent inside CollectiveScopes: waiting for its
// peers, and moving the data. A step's time less its share is the rank's own
// work (the straggler view in metrics.jsonl).
int64_t collective_wait_us();

// Lets the blocking collectives while it lives wait `extra_s` past
// parallel.timeout_s before the watchdog judges them: for a peer busy on
// purpose before heartbeats can say so (rank 0 deciding whether a run folder's
// lock is held, train/run_lock.h, which may watch it longer than the timeout).
class LongerWait {
 public:
  explicit LongerWait(double extra_s);
  ~LongerWait();
  LongerWait(const LongerWait&) = delete;
  LongerWait& operator=(const LongerWait&) = delete;

 private:
  int64_t previous_ms_;
};

// Announces a long phase in this rank's heartbeat while it lives.
class LongPhase {
 public:
  explicit LongPhase(WorkPhase phase);
  ~LongPhase();
  LongPhase(const LongPhase&) = delete;
  LongPhase& operator=(const LongPhase&) = delete;
  // Counts progress in the current phase; any thread may call it.
  static void progress(int64_t amount = 1);

 private:
  WorkPhase previous_;
  int64_t previous_start_ms_;
};

// Collectives the watchdog cannot see through a CollectiveScope: a GPU
// communicator's enqueue returns at once and the collective completes later on
// its stream. The watchdog thread asks each watched source for its oldest
// unfinished collective and its transport's asynchronous error; past the
// timeout, or on an error, it aborts the source (freeing kernels that would
// wait forever) and ends the process as for a blocking collective.
class AsyncCollectives {
 public:
  virtual ~AsyncCollectives() = default;
  struct Oldest {
    const char* op = nullptr;  // null: nothing unfinished
    int64_t enqueued_ms = 0;   // steady clock
  };
  // Forgets the completed collectives and returns the oldest other one.
  virtual Oldest oldest_unfinished() = 0;
  // An error the transport reported on its own ("" when none).
  virtual std::string async_error() = 0;
  virtual void abort() = 0;
};

// Watched from registration until unregistration (a source's lifetime).
void watch_async_collectives(AsyncCollectives* source);
void unwatch_async_collectives(AsyncCollectives* source);

// The steady clock in milliseconds, as the watchdog reads it.
int64_t watchdog_clock_ms();
// Wall-clock milliseconds since the epoch, as heartbeats carry them.
int64_t unix_clock_ms();

// Why the other ranks are not in the collective we have waited `waited_ms` in
// (we entered `our_count` collectives), from their heartbeats at `now_unix_ms`:
// each blocking rank (no heartbeat for `stale_s`, or behind our count) with
// its reason, and whether all of them are excused: alive, in a long phase
// for less than its bound, progressing (within options.timeout_s) where the
// phase reports progress. Exposed for its test.
struct MissingRanks {
  std::string text;      // "rank 2 (h2): no heartbeat for 21 s; rank 3 (h2): ..."; "" when none
  bool excused = false;  // every blocking rank is busy on purpose
};
MissingRanks missing_ranks(const std::vector<std::optional<Heartbeat>>& beats,
                           const WatchdogOptions& options, int64_t our_count, double stale_s,
                           int64_t now_unix_ms);

}  // namespace moelab
