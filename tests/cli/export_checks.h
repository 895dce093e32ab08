// Checks shared by the end-to-end tests of models that go through moelab and
// back to transformers: a corpus file as prep reads it, and the export read by
// transformers.
#pragma once

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

#include "common/checkpoint_test_util.h"
#include "common/temp_dir.h"
#include "data/data_test_util.h"
#include "hub/hf_test_util.h"
#include "util/atomic_file.h"

namespace moelab::testing {

// Documents separated as prep reads text (one "<|endoftext|>" line between them).
inline void write_corpus(const std::string& path, const std::vector<std::string>& docs) {
  std::string text;
  for (const auto& doc : docs) text += doc + "\n<|endoftext|>\n";
  write_file_atomically(path, text);
}

// In `dir`: data/ as prepared, export/ as `moelab export` wrote it from
// `trained`. AutoTokenizer from the export gives prep's ids for `val_texts`
// (less the closing EOS), and AutoModelForCausalLM the trained model's logits
// to 1e-4 on two windows of them.
inline void expect_transformers_reads_export(const TempDir& dir, int64_t seq_len, int64_t vocab,
                                             const std::string& trained,
                                             const std::vector<std::string>& val_texts) {
  const auto prepared = split_documents(dir / "data", "val");
  const auto theirs = hf_token_ids(dir / "export", val_texts, dir);
  ASSERT_EQ(prepared.size(), val_texts.size());
  ASSERT_EQ(theirs.size(), val_texts.size());
  std::vector<int64_t> stream;
  for (size_t i = 0; i < prepared.size(); ++i) {
    EXPECT_EQ(theirs[i], std::vector<int64_t>(prepared[i].begin(), prepared[i].end() - 1))
        << "document " << i << ": '" << val_texts[i] << "'";
    stream.insert(stream.end(), prepared[i].begin(), prepared[i].end());
  }
  ASSERT_GE(int64_t(stream.size()), 2 * seq_len);
  const auto tokens =
      torch::tensor(std::vector<int64_t>(stream.begin(), stream.begin() + 2 * seq_len))
          .reshape({2, seq_len});
  Transformer model = testing::load_model_checkpoint(trained);
  torch::NoGradGuard no_grad;
  const auto ours = model->forward(tokens).logits;
  const auto logits = hf_logits(dir / "export", tokens, dir, vocab);
  const double diff = (ours - logits).abs().max().item<double>();
  std::cout << "trained model: max |logits difference| = " << diff << "\n";
  EXPECT_LE(diff, 1e-4);
}

}  // namespace moelab::testing
