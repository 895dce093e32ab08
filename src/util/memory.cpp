#include "util/memory.h"

#include <fstream>
#include <string>

namespace moelab {

double peak_resident_mib() {
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

}  // namespace moelab
