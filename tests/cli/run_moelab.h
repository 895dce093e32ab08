// The built binary run as a user runs it: its exit status and its output
// (stdout and stderr together).
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace moelab::testing {

struct MoelabResult {
  int code;
  std::string output;
};

inline MoelabResult moelab(const std::string& args) {
  const std::string cmd = std::string(MOELAB_BINARY) + " " + args + " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof(buf), pipe)) out.append(buf, n);
  return {WEXITSTATUS(pclose(pipe)), out};
}

}  // namespace moelab::testing
