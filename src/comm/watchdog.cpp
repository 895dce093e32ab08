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
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

namespace moelab {
namespace {

namespace fs = std::filesystem;

std::atomic<const char*> g_op{""};
std::atomic<int64_t> g_op_start_ms{0};  // steady clock; 0 = not in a collective
std::atomic<int64_t> g_count{0};        // collectives entered so far
std::atomic<int64_t> g_step{0};

std::mutex g_sources_mutex;
std::vector<AsyncCollectives*> g_sources;

int64_t unix_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

std::string host_name() {
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  return name;
}

std::string heartbeat_path(const std::string& dir, int rank) {
  return dir + "/rank" + std::to_string(rank);
}

struct Heartbeat {
  std::string host;
  int64_t pid = 0, step = 0, count = 0, unix_ms = 0;
};

bool read_heartbeat(const std::string& path, Heartbeat& hb) {
  std::ifstream in(path);
  return bool(in >> hb.host >> hb.pid >> hb.step >> hb.count >> hb.unix_ms);
}

// Written whole under a temporary name, then renamed: a reader never sees half.
void write_heartbeat(const std::string& dir, int rank, const std::string& host) {
  const std::string path = heartbeat_path(dir, rank);
  const std::string tmp = dir + "/.rank" + std::to_string(rank) + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << host << ' ' << getpid() << ' ' << g_step.load() << ' ' << g_count.load() << ' '
        << unix_ms() << '\n';
  }
  std::rename(tmp.c_str(), path.c_str());
}

// How often the thread wakes to write its heartbeat and check the collective.
double period_s(double timeout_s) {
  return std::clamp(timeout_s / 10, 0.05, 1.0);
}

}  // namespace

struct WatchdogThread {
  WatchdogOptions options;
  std::string host = host_name();
  std::mutex mutex;
  std::condition_variable wake;
  bool stopping = false;
  std::thread thread;

  [[noreturn]] void fire(const char* op, const std::string& what) {
    // Alive ranks rewrite theirs every period, busy or not (this thread).
    const double stale_s = std::max(2.0, 5 * period_s(options.timeout_s));
    std::string missing = options.heartbeat_dir.empty()
                              ? std::string("no heartbeats to tell which ranks")
                              : describe_missing_ranks(options.heartbeat_dir, options.world_size,
                                                       options.rank, g_count.load(), stale_s);
    if (missing.empty()) {
      missing =
          "every other rank is alive and reached it: the exchange itself stalled (a network "
          "link between hosts?)";
    }
    spdlog::error("rank {} ({}): {} in step {} {}; not answering: {}; ending the job", options.rank,
                  host, op, g_step.load(), what, missing);
    spdlog::default_logger()->flush();
    std::fflush(nullptr);
    std::_Exit(1);
  }

  std::string waited(int64_t waited_ms) const {
    return fmt::format("has waited {:.0f} s for its peers (parallel.timeout_s = {:g})",
                       waited_ms / 1000.0, options.timeout_s);
  }

  // Past the timeout, or with an error, a source is aborted and the process ends.
  void check_async_sources(int64_t now, int64_t timeout_ms) {
    std::lock_guard<std::mutex> lock(g_sources_mutex);
    for (AsyncCollectives* source : g_sources) {
      const std::string error = source->async_error();
      const AsyncCollectives::Oldest oldest = source->oldest_unfinished();
      if (!error.empty()) {
        source->abort();
        fire(oldest.op ? oldest.op : "a GPU collective", "failed: " + error);
      }
      if (oldest.op && now - oldest.enqueued_ms > timeout_ms) {
        source->abort();
        fire(oldest.op, waited(now - oldest.enqueued_ms));
      }
    }
  }

  void run() {
    const auto period = std::chrono::milliseconds(int64_t(period_s(options.timeout_s) * 1000));
    const auto timeout_ms = int64_t(options.timeout_s * 1000);
    std::unique_lock<std::mutex> lock(mutex);
    while (!wake.wait_for(lock, period, [&] { return stopping; })) {
      if (!options.heartbeat_dir.empty())
        write_heartbeat(options.heartbeat_dir, options.rank, host);
      const int64_t now = watchdog_clock_ms();
      const int64_t start = g_op_start_ms.load();
      if (start != 0 && now - start > timeout_ms) fire(g_op.load(), waited(now - start));
      check_async_sources(now, timeout_ms);
    }
  }
};

namespace {
std::unique_ptr<WatchdogThread> g_watchdog;
}

CollectiveWatchdog::CollectiveWatchdog(const WatchdogOptions& options) {
  g_watchdog = std::make_unique<WatchdogThread>();
  g_watchdog->options = options;
  if (!options.heartbeat_dir.empty()) {
    fs::create_directories(options.heartbeat_dir);
    write_heartbeat(options.heartbeat_dir, options.rank, g_watchdog->host);
  }
  g_watchdog->thread = std::thread([w = g_watchdog.get()] { w->run(); });
}

CollectiveWatchdog::~CollectiveWatchdog() {
  {
    std::lock_guard<std::mutex> lock(g_watchdog->mutex);
    g_watchdog->stopping = true;
  }
  g_watchdog->wake.notify_all();
  g_watchdog->thread.join();
  // A run that ends cleanly leaves no heartbeats; the last rank out removes the folder.
  if (const auto& dir = g_watchdog->options.heartbeat_dir; !dir.empty()) {
    std::error_code ignored;
    fs::remove(heartbeat_path(dir, g_watchdog->options.rank), ignored);
    fs::remove(dir, ignored);
  }
  g_watchdog.reset();
}

int64_t watchdog_clock_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(steady_clock::now().time_since_epoch()).count();
}

void watch_async_collectives(AsyncCollectives* source) {
  std::lock_guard<std::mutex> lock(g_sources_mutex);
  g_sources.push_back(source);
}

void unwatch_async_collectives(AsyncCollectives* source) {
  std::lock_guard<std::mutex> lock(g_sources_mutex);
  g_sources.erase(std::remove(g_sources.begin(), g_sources.end(), source), g_sources.end());
}

void CollectiveWatchdog::set_step(int64_t step) {
  g_step = step;
}

CollectiveScope::CollectiveScope(const char* op) {
  g_count.fetch_add(1);
  g_op = op;
  g_op_start_ms = watchdog_clock_ms();
}

CollectiveScope::~CollectiveScope() {
  g_op_start_ms = 0;
}

std::string describe_missing_ranks(const std::string& dir, int world_size, int our_rank,
                                   int64_t our_count, double stale_s) {
  std::ostringstream out;
  const int64_t now = unix_ms();
  for (int r = 0; r < world_size; ++r) {
    Heartbeat hb;
    if (r == our_rank || !read_heartbeat(heartbeat_path(dir, r), hb)) continue;
    const double age_s = double(now - hb.unix_ms) / 1000.0;
    std::string why;
    if (age_s > stale_s) {
      why = "no heartbeat for " + std::to_string(int64_t(age_s)) + " s";
    } else if (hb.count < our_count) {
      why = "has not reached it (at collective " + std::to_string(hb.count) + " of step " +
            std::to_string(hb.step) + ")";
    } else {
      continue;
    }
    if (out.tellp() > 0) out << "; ";
    out << "rank " << r << " (" << hb.host << "): " << why;
  }
  return out.str();
}

}  // namespace moelab
