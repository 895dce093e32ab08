// data_prep/fortunes-multilingual.sh prepares Debian's fortune collections one
// dataset per language, all encoded by one tokenizer trained on all of them,
// from text cleaned of what would mislead training. Run on its quick subset
// (Bulgarian and Chinese) with the packages launch/install-deps.sh installs.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "common/temp_dir.h"

namespace {

namespace fs = std::filesystem;
using moelab::testing::TempDir;

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The script's exit status on the subset; its output goes to `log`.
int prepare(const std::string& out, std::string* log) {
  const std::string cmd = std::string("cd '") + MOELAB_SOURCE_DIR +
                          "' && MOELAB_ML_LANGUAGES='bg zh' data_prep/fortunes-multilingual.sh '" +
                          out + "' '" + MOELAB_BINARY + "' 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof(buf), pipe)) log->append(buf, n);
  return WEXITSTATUS(pclose(pipe));
}

std::string tokenizer_of(const TempDir& dir, const std::string& dataset, const std::string& split) {
  const auto manifest =
      nlohmann::json::parse(read_file(dir / (dataset + "/" + split + "/manifest.json")));
  EXPECT_GT(manifest.at("num_tokens").get<int64_t>(), 0) << dataset << "/" << split;
  return manifest.at("tokenizer_checksum").get<std::string>();
}

TEST(FortunesMultilingual, EachLanguageIsADatasetOfCleanTextUnderOneTokenizer) {
  TempDir dir;
  std::string log;
  ASSERT_EQ(prepare(dir.str(), &log), 0) << log;
  const std::string shared = tokenizer_of(dir, "all", "train");
  for (const std::string dataset : {"bg", "zh"}) {
    EXPECT_EQ(tokenizer_of(dir, dataset, "train"), shared) << dataset;
    EXPECT_EQ(tokenizer_of(dir, dataset, "val"), shared) << dataset;
  }
  // fortunes-zh colours its poems with ANSI escapes (ESC [ 33 m ...): none is
  // left for the tokenizer to learn, while the poems' text is.
  int files = 0;
  for (const auto& entry : fs::directory_iterator(dir / "text/zh")) {
    const std::string text = read_file(entry.path());
    EXPECT_EQ(text.find('\x1b'), std::string::npos) << entry.path();
    EXPECT_NE(text.find("\xe4\xba\xba"), std::string::npos) << entry.path();  // 人
    ++files;
  }
  EXPECT_EQ(files, 3);
}

}  // namespace
