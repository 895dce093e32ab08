#include "util/memory.h"

#include <algorithm>
#include <atomic>
#include <fstream>
#include <string>

namespace moelab {
namespace {

// The highest mark a reset cleared.
std::atomic<double> g_cleared_peak_mib{0.0};

}  // namespace

double resident_peak_since_reset_mib() {
  std::ifstream status("/proc/self/status");
  std::string key;
  while (status >> key) {
    if (key == "VmHWM:") {
      double kib = 0;
      status >> kib;
      return kib / 1024.0;
    }
  }
  return 0.0;
}

double peak_resident_mib() {
  return std::max(g_cleared_peak_mib.load(), resident_peak_since_reset_mib());
}

bool reset_resident_peak() {
  const double peak = resident_peak_since_reset_mib();
  double seen = g_cleared_peak_mib.load();
  while (peak > seen && !g_cleared_peak_mib.compare_exchange_weak(seen, peak)) {
  }
  std::ofstream clear("/proc/self/clear_refs");
  clear << "5";
  clear.flush();
  return bool(clear);
}

}  // namespace moelab
