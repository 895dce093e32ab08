// The binary's contract: 0 ok, 2 bad usage/config/input with a one-line error
// naming file:line:column and key, 1 internal failure.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

namespace {

struct Result {
  int code;
  std::string output;
};

Result moelab(const std::string& args) {
  std::string cmd = std::string(MOELAB_BINARY) + " " + args + " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof(buf), pipe)) out.append(buf, n);
  return {WEXITSTATUS(pclose(pipe)), out};
}

TEST(Cli, ShowsAResolvedConfig) {
  Result r = moelab("config show " + std::string(MOELAB_SOURCE_DIR) + "/configs/moe-small.toml");
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.output.find("[moe]\nenabled = true\n"), std::string::npos) << r.output;
}

TEST(Cli, BadConfigExitsTwoNamingFileLineAndKey) {
  const std::string path = testing::TempDir() + "/bad.toml";
  std::ofstream(path) << "[model]\nd_model = -8\n";
  for (const char* sub : {"config show", "train", "params"}) {
    Result r = moelab(std::string(sub) + " " + path);
    EXPECT_EQ(r.code, 2) << sub;
    EXPECT_NE(r.output.find(path + ":2:11: model.d_model = -8: expected an integer >= 1"),
              std::string::npos)
        << sub << ": " << r.output;
  }
}

TEST(Cli, BadUsageExitsTwo) {
  EXPECT_EQ(moelab("").code, 2);
  EXPECT_EQ(moelab("no-such-command").code, 2);
  EXPECT_EQ(moelab("train").code, 2);  // missing CONFIG
  EXPECT_EQ(moelab("train --help").code, 0);
}

}  // namespace
