// The real published files tests read (../shared/data/README-realworld.md):
// tokenizers, model configs, BLiMP. The folder comes from the build
// (MOELAB_SHARED_DATA: ../shared/data beside the checkout, else
// /work/shared/data) or the environment variable of that name. A missing file
// fails the test that needs it: the real files are the point of such tests.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace moelab::testing {

inline std::string shared_data_dir() {
  const char* overridden = std::getenv("MOELAB_SHARED_DATA");
  return overridden && *overridden ? overridden : MOELAB_SHARED_DATA;
}

// <shared data>/<relative>; an assertion failure names it when it is missing
// (call under ASSERT_NO_FATAL_FAILURE).
inline void shared_data_file(const std::string& relative, std::string* path) {
  *path = shared_data_dir() + "/" + relative;
  ASSERT_TRUE(std::filesystem::exists(*path))
      << *path << " is missing: the real published files live in ../shared/data beside the "
      << "checkout (or set MOELAB_SHARED_DATA)";
}

}  // namespace moelab::testing
