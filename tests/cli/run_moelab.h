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

// mpirun's options for `ranks` local processes (as root, on shared memory).
inline std::string mpirun_prefix(int ranks) {
  return "mpirun --oversubscribe --allow-run-as-root --mca btl self,vader -np " +
         std::to_string(ranks) + " ";
}

// The binary run with `args`, behind `launcher` (e.g. mpirun_prefix(2)).
inline MoelabResult moelab(const std::string& launcher, const std::string& args) {
  const std::string cmd = launcher + MOELAB_BINARY + " " + args + " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof(buf), pipe)) out.append(buf, n);
  return {WEXITSTATUS(pclose(pipe)), out};
}

inline MoelabResult moelab(const std::string& args) {
  return moelab("", args);
}

}  // namespace moelab::testing
