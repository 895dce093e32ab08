// Where the tests find the real published files (tests/CMakeLists.txt's
// MOELAB_SHARED_DATA; the environment variable of that name overrides it).
#pragma once

#include <cstdlib>
#include <string>

namespace moelab::testing {

inline std::string shared_data_dir() {
  const char* overridden = std::getenv("MOELAB_SHARED_DATA");
  return overridden && *overridden ? overridden : MOELAB_SHARED_DATA;
}

}  // namespace moelab::testing
