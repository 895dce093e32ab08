// parallel.timeout_s: a peer that stops answering (a dead node, a cut link, a
// frozen process) must end the job in bounded time, not hang it. Every blocking
// collective runs inside a CollectiveScope; a watchdog thread sees one that has
// waited longer than the timeout, logs the operation, the step and which ranks
// have not reached it (from the ranks' heartbeat files), and ends this process
// with exit code 1 without touching MPI (which may itself be stuck). The
// launcher (mpirun, srun) then ends the job; ranks cut off from it end through
// their own watchdog, so no rank outlives the job.
//
// Heartbeats: the thread rewrites <dir>/rank<r> about once a second (host, pid,
// step, collective count, time), on the run folder's shared file system. A rank
// whose heartbeat is old is dead or frozen; one whose collective count is below
// ours never entered the collective we wait in.
#pragma once

#include <cstdint>
#include <string>

namespace moelab {

struct WatchdogOptions {
  double timeout_s = 600;
  std::string heartbeat_dir;  // "" = no heartbeats (the message then names no ranks)
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

  // The training step the next collectives belong to, for the message.
  static void set_step(int64_t step);
};

// Marks a blocking collective named `op` (a string literal) while it lives.
class CollectiveScope {
 public:
  explicit CollectiveScope(const char* op);
  ~CollectiveScope();
  CollectiveScope(const CollectiveScope&) = delete;
  CollectiveScope& operator=(const CollectiveScope&) = delete;
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

// The description of the ranks blocking us, from the heartbeat files in `dir`:
// e.g. "rank 2 (h2): no heartbeat for 21 s; rank 3 (h2): at collective 40 of
// step 7". Empty when every other rank's heartbeat is fresh and at or past
// `our_count`. `stale_s`: how old a heartbeat may be. Exposed for its test.
std::string describe_missing_ranks(const std::string& dir, int world_size, int our_rank,
                                   int64_t our_count, double stale_s);

}  // namespace moelab
