// Heartbeats: each rank's line in <run>/heartbeats/rank<r>, rewritten about once
// a second on the run folder's shared file system by a thread of its own
// (HeartbeatThread), so a file system that hangs the write stalls only that
// thread: the collective watchdog (watchdog.h) reads the table this thread
// fills and never touches a file. A heartbeat says where its rank is: its
// step, how many collectives it has entered, and the long phase it is in
// (a checkpoint write, an evaluation, ...) with that phase's progress.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace moelab {

// Work a rank may legitimately spend longer than parallel.timeout_s on between
// two collectives, which its heartbeat announces (watchdog.h's LongPhase).
enum class WorkPhase {
  kNone,
  kCheckpointWrite,
  kCheckpointRead,
  kEvaluation,
  kProfileExport,
  kFirstStep
};

// "checkpoint_write", ...: the name heartbeats and messages use ("none" for kNone).
const char* work_phase_name(WorkPhase phase);
// Whether the phase reports progress as it goes (bytes, batches): a peer in it
// that stops progressing for parallel.timeout_s is treated as stuck.
bool work_phase_reports_progress(WorkPhase phase);

struct Heartbeat {
  std::string host;
  int64_t pid = 0, step = 0, count = 0;
  int64_t unix_ms = 0;  // when it was written, by the writer's clock
  WorkPhase phase = WorkPhase::kNone;
  int64_t phase_ms = 0;     // how long the rank had been in the phase
  int64_t progress = 0;     // the phase's progress count
  int64_t progress_ms = 0;  // since the count last changed
};

// One line; read_heartbeat accepts the lines of older moelab too (no phase).
std::string format_heartbeat(const Heartbeat& beat);
std::optional<Heartbeat> parse_heartbeat(const std::string& line);

std::string heartbeat_path(const std::string& dir, int rank);
// Every rank's heartbeat in `dir` (nullopt where none is readable). Never
// blocks on a file that is not a regular file (a FIFO).
std::vector<std::optional<Heartbeat>> read_heartbeats(const std::string& dir, int world_size);

// Peers' heartbeats as a thread last read them.
struct HeartbeatTable {
  std::vector<std::optional<Heartbeat>> ranks;
  int64_t read_unix_ms = 0;  // when; 0: never
};

}  // namespace moelab
