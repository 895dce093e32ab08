// A run folder belongs to one job at a time. Rank 0 holds <run>/run.lock for
// the run's life: a line naming its host, pid and start, rewritten every
// heartbeat period (refresh(), on the watchdog's heartbeat thread) with a beat
// count. The lock lives on the run folder's file system, which every host
// shares, so a second job into the folder, on any host, finds it:
//  - held by a live job (its beat moves) → exit 2 naming the holder;
//  - left by a dead job (its process gone from this host or a zombie there,
//    or its beat standing still for ten of its periods, 3 to 10 s) → taken
//    over with a warning, so a requeued job resumes. The other ranks wait for
//    that verdict past parallel.timeout_s if they must (LongerWait).
// A holder that finds its lock taken over (its beat stood still that long: a
// hung file system) ends at once rather than write beside the new job.
#pragma once

#include <memory>
#include <string>

#include "comm/communicator.h"

namespace moelab {

class RunLock {
 public:
  // Collective over `world`: rank 0 takes the lock, waiting as long as it
  // takes to tell a live holder from a dead one; InputError on every rank,
  // naming the holder, when another job holds it. `refresh_s`: how often
  // refresh() will run.
  RunLock(const std::string& run_dir, Communicator& world, double refresh_s);
  // Rank 0 removes the lock, if it still holds it.
  ~RunLock();
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;

  // Rank 0: rewrites the lock with the next beat. Any rank: nothing else.
  void refresh();

  struct Holder;  // what the lock says (run_lock.cpp)

 private:
  std::string path_;
  std::unique_ptr<Holder> mine_;  // rank 0 only
};

}  // namespace moelab
