#include "comm/heartbeat.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sstream>

namespace moelab {
namespace {

constexpr WorkPhase kPhases[] = {WorkPhase::kNone,           WorkPhase::kCheckpointWrite,
                                 WorkPhase::kCheckpointRead, WorkPhase::kEvaluation,
                                 WorkPhase::kProfileExport,  WorkPhase::kFirstStep};

// The file's first line without blocking: nothing from a FIFO or a device.
std::optional<std::string> read_regular_file_line(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  struct stat info {};
  std::string text;
  if (::fstat(fd, &info) == 0 && S_ISREG(info.st_mode)) {
    char buffer[512];
    const ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n > 0) text.assign(buffer, size_t(n));
  }
  ::close(fd);
  if (text.empty()) return std::nullopt;
  return text.substr(0, text.find('\n'));
}

}  // namespace

const char* work_phase_name(WorkPhase phase) {
  switch (phase) {
    case WorkPhase::kCheckpointWrite:
      return "checkpoint_write";
    case WorkPhase::kCheckpointRead:
      return "checkpoint_read";
    case WorkPhase::kEvaluation:
      return "evaluation";
    case WorkPhase::kProfileExport:
      return "profile_export";
    case WorkPhase::kFirstStep:
      return "first_step";
    default:
      return "none";
  }
}

bool work_phase_reports_progress(WorkPhase phase) {
  return phase == WorkPhase::kCheckpointWrite || phase == WorkPhase::kCheckpointRead ||
         phase == WorkPhase::kEvaluation;
}

std::string format_heartbeat(const Heartbeat& b) {
  std::ostringstream out;
  out << b.host << ' ' << b.pid << ' ' << b.step << ' ' << b.count << ' ' << b.unix_ms << ' '
      << work_phase_name(b.phase) << ' ' << b.phase_ms << ' ' << b.progress << ' ' << b.progress_ms
      << '\n';
  return out.str();
}

std::optional<Heartbeat> parse_heartbeat(const std::string& line) {
  std::istringstream in(line);
  Heartbeat b;
  if (!(in >> b.host >> b.pid >> b.step >> b.count >> b.unix_ms)) return std::nullopt;
  std::string phase;
  if (!(in >> phase >> b.phase_ms >> b.progress >> b.progress_ms)) return b;
  for (WorkPhase p : kPhases) {
    if (phase == work_phase_name(p)) b.phase = p;
  }
  return b;
}

std::string heartbeat_path(const std::string& dir, int rank) {
  return dir + "/rank" + std::to_string(rank);
}

std::vector<std::optional<Heartbeat>> read_heartbeats(const std::string& dir, int world_size) {
  std::vector<std::optional<Heartbeat>> beats(static_cast<size_t>(world_size));
  for (int r = 0; r < world_size; ++r) {
    if (auto line = read_regular_file_line(heartbeat_path(dir, r)))
      beats[r] = parse_heartbeat(*line);
  }
  return beats;
}

}  // namespace moelab
