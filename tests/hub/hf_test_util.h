// Shared by the tests that check moelab against transformers: the reference
// scripts in tests/reference/ (a tiny random model, its logits, a tokenizer's
// ids), run with the project's Python. transformers comes from
// launch/requirements.txt; the tests that need it fail without it.
#pragma once

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "common/temp_dir.h"

namespace moelab::testing {

inline const std::string kPython = MOELAB_TORCH_PYTHON;
inline const std::string kReference = std::string(MOELAB_SOURCE_DIR) + "/tests/reference/";

// transformers is pinned in launch/requirements.txt, so a missing one is a
// broken install: the tests that need it fail rather than skip.
inline bool transformers_available() {
  static const bool available =
      std::system((kPython + " -c 'import transformers' >/dev/null 2>&1").c_str()) == 0;
  return available;
}

// transformers' logits for `tokens` from the model folder `hf_dir`.
inline torch::Tensor hf_logits(const std::string& hf_dir, const torch::Tensor& tokens,
                               const TempDir& dir, int64_t vocab) {
  {
    std::ofstream out(dir / "tokens.txt");
    for (int64_t b = 0; b < tokens.size(0); ++b) {
      for (int64_t s = 0; s < tokens.size(1); ++s) out << tokens[b][s].item<int64_t>() << " ";
      out << "\n";
    }
  }
  const std::string cmd = kPython + " " + kReference + "hf_logits.py " + hf_dir + " " +
                          (dir / "tokens.txt") + " " + (dir / "logits.bin");
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream in(dir / "logits.bin", std::ios::binary);
  auto logits = torch::empty({tokens.size(0), tokens.size(1), vocab});
  in.read(static_cast<char*>(logits.data_ptr()), std::streamsize(logits.nbytes()));
  EXPECT_TRUE(in.good()) << "short logits file";
  return logits;
}

// A tiny random transformers model of `family` (hf_make_model.py) in `out`;
// `options` are whitespace-separated OPTION=VALUE words (a value may be JSON:
// each word reaches the script as one argument, quotes and all).
inline void make_hf_model(const std::string& family, const std::string& options,
                          const std::string& out) {
  std::string cmd = kPython + " " + kReference + "hf_make_model.py " + family + " " + out;
  std::istringstream words(options);
  for (std::string word; words >> word;) cmd += " '" + word + "'";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

// transformers' AutoTokenizer ids of each text, by the tokenizer in `hf_dir`.
inline std::vector<std::vector<int64_t>> hf_token_ids(const std::string& hf_dir,
                                                      const std::vector<std::string>& texts,
                                                      const TempDir& dir) {
  {
    std::ofstream out(dir / "texts.txt", std::ios::binary);
    for (size_t i = 0; i < texts.size(); ++i) out << (i ? "\n" : "") << texts[i];
  }
  const std::string cmd = kPython + " " + kReference + "hf_tokenize.py " + hf_dir + " " +
                          (dir / "texts.txt") + " " + (dir / "ids.txt");
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::vector<std::vector<int64_t>> ids;
  std::ifstream in(dir / "ids.txt");
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    ids.emplace_back(std::istream_iterator<int64_t>(words), std::istream_iterator<int64_t>());
  }
  return ids;
}

}  // namespace moelab::testing
