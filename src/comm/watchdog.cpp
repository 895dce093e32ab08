#include "comm/watchdog.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <thread>

namespace moelab {
namespace {

namespace fs = std::filesystem;

std::atomic<const char*> g_op{""};
std::atomic<int64_t> g_op_start_ms{0};  // steady clock; 0 = not in a collective
std::atomic<int64_t> g_count{0};        // collectives entered so far
std::atomic<int64_t> g_step{0};
std::atomic<int64_t> g_wait_us{0};         // inside CollectiveScopes, in total
std::atomic<int64_t> g_longer_wait_ms{0};  // LongerWait's allowance

std::atomic<WorkPhase> g_phase{WorkPhase::kNone};
std::atomic<int64_t> g_phase_start_ms{0};  // steady clock
std::atomic<int64_t> g_progress{0};
std::atomic<int64_t> g_progress_ms{0};  // steady clock of the last change

std::mutex g_sources_mutex;
std::vector<AsyncCollectives*> g_sources;

int64_t steady_us() {
  using namespace std::chrono;
  return duration_cast<microseconds>(steady_clock::now().time_since_epoch()).count();
}

std::string host_name() {
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  return name;
}

// How old a heartbeat may be: alive ranks rewrite theirs every period.
double stale_s(double timeout_s) {
  return std::max(2.0, 5 * heartbeat_period_s(timeout_s));
}

Heartbeat our_heartbeat(const std::string& host) {
  const int64_t now = watchdog_clock_ms();
  Heartbeat b;
  b.host = host;
  b.pid = getpid();
  b.step = g_step.load();
  b.count = g_count.load();
  b.unix_ms = unix_clock_ms();
  b.phase = g_phase.load();
  b.phase_ms = b.phase == WorkPhase::kNone ? 0 : now - g_phase_start_ms.load();
  b.progress = g_progress.load();
  b.progress_ms = now - g_progress_ms.load();
  return b;
}

// Written whole under a temporary name, then renamed: a reader never sees half.
void write_heartbeat(const std::string& dir, int rank, const Heartbeat& beat) {
  const std::string tmp = dir + "/.rank" + std::to_string(rank) + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << format_heartbeat(beat);
  }
  std::rename(tmp.c_str(), heartbeat_path(dir, rank).c_str());
}

double bound_s(const WatchdogOptions& options, WorkPhase phase) {
  return phase == WorkPhase::kCheckpointWrite || phase == WorkPhase::kCheckpointRead
             ? options.checkpoint_timeout_s
             : options.phase_timeout_s;
}

// Why rank `hb` in a long phase has not reached our collective, and whether
// that excuses it.
std::string describe_phase(const Heartbeat& hb, const WatchdogOptions& options, int64_t age_ms,
                           bool& excused) {
  const double in_phase_s = double(hb.phase_ms + age_ms) / 1000.0;
  const double quiet_s = double(hb.progress_ms + age_ms) / 1000.0;
  const double bound = bound_s(options, hb.phase);
  std::string why = fmt::format("in {} for {:.0f} s", work_phase_name(hb.phase), in_phase_s);
  if (work_phase_reports_progress(hb.phase)) {
    why += fmt::format(", progress {} ({:.0f} s ago)", hb.progress, quiet_s);
  }
  excused = in_phase_s < bound;
  if (!excused) why += fmt::format(", past its bound of {:g} s", bound);
  if (excused && work_phase_reports_progress(hb.phase) && quiet_s > options.timeout_s) {
    excused = false;
    why += ", no progress for longer than parallel.timeout_s";
  }
  return why;
}

}  // namespace

MissingRanks missing_ranks(const std::vector<std::optional<Heartbeat>>& beats,
                           const WatchdogOptions& options, int64_t our_count, double stale_s,
                           int64_t now_unix_ms) {
  MissingRanks out;
  bool all_excused = true;
  for (int r = 0; r < int(beats.size()); ++r) {
    if (r == options.rank) continue;
    if (!beats[r]) {
      all_excused = false;  // no heartbeat to tell
      continue;
    }
    const Heartbeat& hb = *beats[r];
    const int64_t age_ms = now_unix_ms - hb.unix_ms;
    std::string why;
    bool excused = false;
    if (age_ms > stale_s * 1000) {
      why = "no heartbeat for " + std::to_string(age_ms / 1000) + " s";
    } else if (hb.count >= our_count) {
      continue;
    } else if (hb.phase != WorkPhase::kNone) {
      why = "has not reached it (" + describe_phase(hb, options, age_ms, excused) + ")";
    } else {
      why = "has not reached it (at collective " + std::to_string(hb.count) + " of step " +
            std::to_string(hb.step) + ")";
    }
    all_excused = all_excused && excused;
    if (!out.text.empty()) out.text += "; ";
    out.text += "rank " + std::to_string(r) + " (" + hb.host + "): " + why;
  }
  out.excused = !out.text.empty() && all_excused;
  return out;
}

namespace {

// Both threads' state. Shared with them: a heartbeat thread hung in a write
// is left behind at the end, still holding it.
struct WatchdogState {
  WatchdogOptions options;
  std::string host = host_name();
  std::mutex mutex;  // guards the fields below
  std::condition_variable wake;
  bool stopping = false;
  bool heartbeat_done = false;
  HeartbeatTable table;
  std::function<void()> extra_beat;
  int64_t excused_count = -1;  // the collective whose excused wait was logged
  int64_t started_unix_ms = unix_clock_ms();

  std::chrono::milliseconds period() const {
    return std::chrono::milliseconds(int64_t(heartbeat_period_s(options.timeout_s) * 1000));
  }
};

std::shared_ptr<WatchdogState> g_state;

[[noreturn]] void fire(WatchdogState& s, const char* op, const std::string& what,
                       std::string missing) {
  if (missing.empty()) {
    missing =
        "every other rank is alive and reached it: the exchange itself stalled (a network "
        "link between hosts?)";
  }
  spdlog::error("rank {} ({}): {} in step {} {}; not answering: {}; ending the job", s.options.rank,
                s.host, op, g_step.load(), what, missing);
  spdlog::default_logger()->flush();
  std::fflush(nullptr);
  std::_Exit(1);
}

std::string waited(const WatchdogOptions& options, int64_t waited_ms) {
  return fmt::format("has waited {:.0f} s for its peers (parallel.timeout_s = {:g})",
                     waited_ms / 1000.0, options.timeout_s);
}

// A collective `op` has waited `waited_ms`, past the timeout: keeps waiting
// while the ranks it waits for are busy on purpose, else ends the process.
void judge(WatchdogState& s, const char* op, int64_t waited_ms) {
  HeartbeatTable table;
  WatchdogOptions options;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    table = s.table;
    options = s.options;
  }
  if (options.heartbeat_dir.empty()) {
    fire(s, op, waited(options, waited_ms), "no heartbeats to tell which ranks");
  }
  const double stale = stale_s(options.timeout_s);
  const int64_t now = unix_clock_ms();
  // Peers unread, or read too long ago, cannot excuse anything.
  const int64_t read_ms = std::max(table.read_unix_ms, s.started_unix_ms);
  if (table.read_unix_ms == 0 || now - read_ms > stale * 1000) {
    fire(s, op, waited(options, waited_ms),
         "unknown: this rank has not read its peers' heartbeats for " +
             std::to_string((now - read_ms) / 1000) + " s (a hung file system?)");
  }
  const MissingRanks missing = missing_ranks(table.ranks, options, g_count.load(), stale, now);
  if (!missing.excused) fire(s, op, waited(options, waited_ms), missing.text);
  if (std::exchange(s.excused_count, g_count.load()) != g_count.load()) {
    spdlog::warn(
        "rank {}: {} in step {} waits past parallel.timeout_s for ranks busy on purpose: {}",
        s.options.rank, op, g_step.load(), missing.text);
  }
}

// Past the timeout, or with an error, a source is aborted and the process ends.
void check_async_sources(WatchdogState& s, int64_t now, int64_t timeout_ms) {
  std::lock_guard<std::mutex> lock(g_sources_mutex);
  for (AsyncCollectives* source : g_sources) {
    const std::string error = source->async_error();
    const AsyncCollectives::Oldest oldest = source->oldest_unfinished();
    if (!error.empty()) {
      source->abort();
      fire(s, oldest.op ? oldest.op : "a GPU collective", "failed: " + error, "");
    }
    if (oldest.op && now - oldest.enqueued_ms > timeout_ms) {
      source->abort();
      fire(s, oldest.op, waited(s.options, now - oldest.enqueued_ms), "");
    }
  }
}

void watch(std::shared_ptr<WatchdogState> s) {
  const auto timeout_ms = int64_t(s->options.timeout_s * 1000);
  std::unique_lock<std::mutex> lock(s->mutex);
  while (!s->wake.wait_for(lock, s->period(), [&] { return s->stopping; })) {
    lock.unlock();
    const int64_t now = watchdog_clock_ms();
    const int64_t start = g_op_start_ms.load();
    if (start != 0 && now - start > timeout_ms + g_longer_wait_ms.load())
      judge(*s, g_op.load(), now - start);
    check_async_sources(*s, now, timeout_ms);
    lock.lock();
  }
}

// Writes our heartbeat, reads the peers', runs the extra beats; any of it may
// hang on a stuck file system, which only this thread then waits for.
void beat(std::shared_ptr<WatchdogState> s) {
  const WatchdogOptions& o = s->options;
  std::unique_lock<std::mutex> lock(s->mutex);
  do {
    lock.unlock();
    write_heartbeat(o.heartbeat_dir, o.rank, our_heartbeat(s->host));
    HeartbeatTable table{read_heartbeats(o.heartbeat_dir, o.world_size), unix_clock_ms()};
    if (s->extra_beat) s->extra_beat();
    lock.lock();
    s->table = std::move(table);
  } while (!s->wake.wait_for(lock, s->period(), [&] { return s->stopping; }));
  s->heartbeat_done = true;
  s->wake.notify_all();
}

std::thread g_watch_thread;

}  // namespace

CollectiveWatchdog::CollectiveWatchdog(const WatchdogOptions& options) {
  g_state = std::make_shared<WatchdogState>();
  g_state->options = options;
  g_state->options.heartbeat_dir.clear();
  g_state->heartbeat_done = true;
  g_watch_thread = std::thread(watch, g_state);
  if (!options.heartbeat_dir.empty()) start_heartbeats(options.heartbeat_dir);
}

void CollectiveWatchdog::start_heartbeats(const std::string& dir, std::function<void()> beat_too) {
  fs::create_directories(dir);
  {
    std::lock_guard<std::mutex> lock(g_state->mutex);
    g_state->options.heartbeat_dir = dir;
    g_state->extra_beat = std::move(beat_too);
    g_state->heartbeat_done = false;
  }
  std::thread(beat, g_state).detach();
}

CollectiveWatchdog::~CollectiveWatchdog() {
  std::unique_lock<std::mutex> lock(g_state->mutex);
  g_state->stopping = true;
  g_state->wake.notify_all();
  // A heartbeat thread stuck in a write is left behind; the process ends soon.
  const bool beats_ended = g_state->wake.wait_for(lock, std::chrono::seconds(2) + g_state->period(),
                                                  [] { return g_state->heartbeat_done; });
  lock.unlock();
  g_watch_thread.join();
  // A run that ends cleanly leaves no heartbeats; the last rank out removes the folder.
  if (const auto& dir = g_state->options.heartbeat_dir; beats_ended && !dir.empty()) {
    std::error_code ignored;
    fs::remove(heartbeat_path(dir, g_state->options.rank), ignored);
    fs::remove(dir, ignored);
  }
  g_state.reset();
}

void CollectiveWatchdog::set_step(int64_t step) {
  g_step = step;
}

double heartbeat_period_s(double timeout_s) {
  return std::clamp(timeout_s / 10, 0.05, 1.0);
}

CollectiveScope::CollectiveScope(const char* op) {
  g_count.fetch_add(1);
  g_op = op;
  g_op_start_ms = watchdog_clock_ms();
  start_us_ = steady_us();
}

CollectiveScope::~CollectiveScope() {
  g_op_start_ms = 0;
  g_wait_us += steady_us() - start_us_;
}

int64_t collective_wait_us() {
  return g_wait_us.load();
}

LongerWait::LongerWait(double extra_s)
    : previous_ms_(g_longer_wait_ms.exchange(int64_t(extra_s * 1000))) {}

LongerWait::~LongerWait() {
  g_longer_wait_ms = previous_ms_;
}

LongPhase::LongPhase(WorkPhase phase)
    : previous_(g_phase.load()), previous_start_ms_(g_phase_start_ms.load()) {
  const int64_t now = watchdog_clock_ms();
  g_phase_start_ms = now;
  g_progress_ms = now;
  g_phase = phase;
}

LongPhase::~LongPhase() {
  g_phase = previous_;
  g_phase_start_ms = previous_start_ms_;
  g_progress_ms = watchdog_clock_ms();
}

void LongPhase::progress(int64_t amount) {
  g_progress += amount;
  g_progress_ms = watchdog_clock_ms();
}

int64_t watchdog_clock_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(steady_clock::now().time_since_epoch()).count();
}

int64_t unix_clock_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

void watch_async_collectives(AsyncCollectives* source) {
  std::lock_guard<std::mutex> lock(g_sources_mutex);
  g_sources.push_back(source);
}

void unwatch_async_collectives(AsyncCollectives* source) {
  std::lock_guard<std::mutex> lock(g_sources_mutex);
  g_sources.erase(std::remove(g_sources.begin(), g_sources.end(), source), g_sources.end());
}

}  // namespace moelab
