#include "train/run_lock.h"

#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "comm/failure.h"
#include "comm/watchdog.h"
#include "util/atomic_file.h"
#include "util/error.h"

namespace moelab {

struct RunLock::Holder {
  std::string host;
  int64_t pid = 0;
  int64_t started_unix_ms = 0;
  double refresh_s = 1;
  int64_t beat = 0;

  nlohmann::json json() const {
    return {{"host", host},
            {"pid", pid},
            {"started_unix_ms", started_unix_ms},
            {"refresh_s", refresh_s},
            {"beat", beat}};
  }
  bool same_job(const Holder& other) const {
    return host == other.host && pid == other.pid && started_unix_ms == other.started_unix_ms;
  }
  std::string describe() const { return "host " + host + ", pid " + std::to_string(pid); }
};

namespace {

namespace fs = std::filesystem;

std::string this_host() {
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  return name;
}

std::optional<RunLock::Holder> read_holder(const std::string& path) {
  std::ifstream in(path);
  nlohmann::json j;
  try {
    if (!(in >> j)) return std::nullopt;
    RunLock::Holder h;
    h.host = j.at("host").get<std::string>();
    h.pid = j.at("pid").get<int64_t>();
    h.started_unix_ms = j.at("started_unix_ms").get<int64_t>();
    h.refresh_s = j.at("refresh_s").get<double>();
    h.beat = j.at("beat").get<int64_t>();
    return h;
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;  // being rewritten, or not ours to read: looked at again
  }
}

// Creates the lock only if there is none: linked into place whole, so a
// reader never sees it half written.
bool create_exclusively(const std::string& path, const std::string& text) {
  const std::string tmp = path + "." + std::to_string(getpid()) + ".tmp";
  write_file_atomically(tmp, text);
  const bool made = ::link(tmp.c_str(), path.c_str()) == 0;
  const int error = errno;
  std::remove(tmp.c_str());
  if (!made && error != EEXIST) {
    throw InputError(path + ": cannot create the run folder's lock: " + std::strerror(error));
  }
  return made;
}

// A zombie counts as gone: a process that ended but that no one has reaped
// (its launcher ended first, and the container's init does not reap).
bool process_gone(const RunLock::Holder& h) {
  if (h.host != this_host()) return false;
  if (::kill(pid_t(h.pid), 0) != 0) return errno == ESRCH;
  std::ifstream stat("/proc/" + std::to_string(h.pid) + "/stat");
  const std::string text(std::istreambuf_iterator<char>(stat), {});
  // The state follows "pid (comm) "; comm may hold spaces and parentheses.
  const auto close = text.rfind(')');
  return close != std::string::npos && close + 2 < text.size() && text[close + 2] == 'Z';
}

// The longest a holder is watched: its refresh period is at most 1 s
// (heartbeat_period_s), unless the lock was written by something else.
constexpr double kLongestWatchS = 10;

// How long a holder's beat may stand still before its job counts as dead.
double dead_after_s(const RunLock::Holder& h) {
  return std::clamp(10 * h.refresh_s, 3.0, kLongestWatchS);
}

enum class Verdict { kAlive, kDead, kGone };

// Watches a holder's beat until it moves (alive) or stands still too long (dead).
Verdict judge(const std::string& path, const RunLock::Holder& seen) {
  if (process_gone(seen)) return Verdict::kDead;
  spdlog::info("{} is held by {}: watching for up to {:.0f} s whether that job is alive", path,
               seen.describe(), dead_after_s(seen));
  const auto until = std::chrono::steady_clock::now() +
                     std::chrono::milliseconds(int64_t(dead_after_s(seen) * 1000));
  while (std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const auto now = read_holder(path);
    if (!fs::exists(path)) return Verdict::kGone;
    if (now && (!now->same_job(seen) || now->beat != seen.beat)) return Verdict::kAlive;
  }
  return Verdict::kDead;
}

// Rank 0: the lock taken, or what stops this job.
std::string take(const std::string& path, const RunLock::Holder& mine) {
  const std::string text = mine.json().dump() + "\n";
  for (int attempt = 0; attempt < 100; ++attempt) {
    if (create_exclusively(path, text)) return "";
    const auto holder = read_holder(path);
    if (!holder) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      continue;
    }
    switch (judge(path, *holder)) {
      case Verdict::kAlive:
        return path + ": the run folder is in use by another job (" + holder->describe() +
               "); give this run another --out, or stop that job first";
      case Verdict::kGone:
        continue;
      case Verdict::kDead:
        spdlog::warn("{}: taking over the lock of a job that is gone ({}; its lock stood still)",
                     path, holder->describe());
        write_file_atomically(path, text);
        return "";
    }
  }
  return path + ": cannot take the run folder's lock (it keeps changing hands)";
}

}  // namespace

RunLock::RunLock(const std::string& run_dir, Communicator& world, double refresh_s)
    : path_(run_dir + "/run.lock") {
  // The other ranks wait while rank 0 watches a holder, perhaps longer than
  // parallel.timeout_s, before heartbeats (in the run folder) could say why.
  LongerWait watching(kLongestWatchS);
  std::string error;
  if (world.rank() == 0) {
    mine_ = std::make_unique<Holder>();
    mine_->host = this_host();
    mine_->pid = getpid();
    mine_->started_unix_ms = unix_clock_ms();
    mine_->refresh_s = refresh_s;
    try {
      fs::create_directories(run_dir);
      error = take(path_, *mine_);
    } catch (const std::exception& e) {
      error = e.what();
    }
    if (!error.empty()) mine_.reset();
  }
  agree_or_throw(world, error);
}

RunLock::~RunLock() {
  if (!mine_) return;
  const auto holder = read_holder(path_);
  if (holder && holder->same_job(*mine_)) std::remove(path_.c_str());
}

void RunLock::refresh() {
  if (!mine_) return;
  const auto holder = read_holder(path_);
  if (holder && !holder->same_job(*mine_)) {
    spdlog::error(
        "{}: another job ({}) took the run folder over while this one could not refresh "
        "its lock; ending this job",
        path_, holder->describe());
    spdlog::default_logger()->flush();
    std::_Exit(2);
  }
  ++mine_->beat;
  write_file_atomically(path_, mine_->json().dump() + "\n");
}

}  // namespace moelab
