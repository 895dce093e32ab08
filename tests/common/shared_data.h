// The real published files tests read (../shared/data/README-realworld.md):
// tokenizers, model configs, BLiMP. The folder comes from the build
// (MOELAB_SHARED_DATA: ../shared/data beside the checkout, else
// /work/shared/data) or the environment variable of that name. A missing file
// fails the test that needs it: the real files are the point of such tests.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "data/input_stream.h"

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

// shared_data_file(relative) decompressed (the files are zstd) into `out`.
inline void decompress_shared_data(const std::string& relative, const std::string& out) {
  std::string source;
  ASSERT_NO_FATAL_FAILURE(shared_data_file(relative, &source));
  const auto stream = open_input_stream(source);
  std::ofstream file(out, std::ios::binary);
  char buffer[1 << 16];
  while (const size_t n = stream->read(buffer, sizeof(buffer)))
    file.write(buffer, std::streamsize(n));
  ASSERT_TRUE(file.good()) << "cannot write " << out;
}

}  // namespace moelab::testing
