// A model made by transformers, end to end through the binary: a tiny random
// Llama saved with its own byte-level BPE tokenizer.json (trained here), then
// `moelab import`, `moelab prep` of new text with that tokenizer.json, a few
// steps of `moelab train` from the imported weights (train.init_from), and
// `moelab export`; transformers reads the export and gives moelab's logits and
// prep's ids. docs/convert.md walks through the same commands.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdint>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_io.h"
#include "cli/export_checks.h"
#include "cli/run_moelab.h"
#include "common/checkpoint_test_util.h"
#include "common/temp_dir.h"
#include "config/load.h"
#include "data/batch_loader.h"
#include "data/data_test_util.h"
#include "data/dataset_info.h"
#include "data/shard_reader.h"
#include "hub/hf_test_util.h"
#include "util/atomic_file.h"

namespace moelab {
namespace {

using testing::hf_logits;
using testing::hf_token_ids;
using testing::make_document;
using testing::moelab;
using testing::MoelabResult;
using testing::split_documents;
using testing::TempDir;

constexpr int64_t kBatchSeqs = 8;
constexpr int kSeed = 5;
constexpr int kValDocs = 8;

// Short documents with numbers and punctuation (what the Llama 3 split
// pattern cuts apart), distinct from the tokenizer's training text.
std::vector<std::string> corpus_documents(int first, int count) {
  std::vector<std::string> docs;
  for (int i = first; i < first + count; ++i) {
    docs.push_back("Note " + std::to_string(i * 37) + ": " + make_document(i) + " (" +
                   make_document(i + 5000) + "?)");
  }
  return docs;
}

// <dir>/llama3.json: a Llama-3-style byte-level BPE (tokenizer_reference.py)
// trained on text the test makes.
void train_tokenizer_json(const TempDir& dir) {
  std::vector<std::string> text;
  for (int i = 0; i < 300; ++i) text.push_back(make_document(10000 + i) + " " + std::to_string(i));
  write_file_atomically(dir / "train.json", nlohmann::json(text).dump());
  write_file_atomically(dir / "docs.json", "[]");
  const std::string cmd = testing::kPython + " " + testing::kReference + "tokenizer_reference.py " +
                          dir.str() + " llama3";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

// Mean next-token cross-entropy of transformers' model in `hf_dir` on
// windows [batch, seq_len + 1], as the trainer's loss is.
double hf_loss(const std::string& hf_dir, const torch::Tensor& windows, const TempDir& dir,
               int64_t vocab) {
  const int64_t len = windows.size(1) - 1;
  const auto logits = hf_logits(hf_dir, windows.slice(1, 0, len), dir, vocab);
  return torch::nn::functional::cross_entropy(logits.reshape({-1, vocab}),
                                              windows.slice(1, 1).reshape({-1}))
      .item<double>();
}

double first_step_loss(const std::string& run_dir) {
  std::ifstream in(run_dir + "/metrics.jsonl");
  std::string line;
  std::getline(in, line);
  const auto record = nlohmann::json::parse(line);
  EXPECT_EQ(record.at("step").get<int64_t>(), 1) << line;
  return record.at("loss").get<double>();
}

// The tokenizer, the transformers model saved with it, its import, and the
// new text prepared with the model's tokenizer.json (val.txt: `val_texts`).
void import_and_prep(const TempDir& dir, const std::vector<std::string>& val_texts) {
  ASSERT_NO_FATAL_FAILURE(train_tokenizer_json(dir));
  ASSERT_NO_FATAL_FAILURE(testing::make_hf_model(
      "llama", "tokenizer=" + (dir / "llama3.json") + " max_position_embeddings=16", dir / "hf"));
  MoelabResult r = moelab("import " + (dir / "hf") + " --out " + (dir / "imported"));
  ASSERT_EQ(r.code, 0) << r.output;
  testing::write_corpus(dir / "corpus.txt", corpus_documents(kValDocs, 300));
  testing::write_corpus(dir / "val.txt", val_texts);
  r = moelab("prep --input " + (dir / "corpus.txt") + " --val-input " + (dir / "val.txt") +
             " --tokenizer " + (dir / "hf/tokenizer.json") + " --out " + (dir / "data"));
  ASSERT_EQ(r.code, 0) << r.output;
}

// Five steps from the import's config.toml (train.init_from: the imported
// weights), on the prepared data; a checkpoint at the end.
void train_from_import(const TempDir& dir) {
  const MoelabResult r =
      moelab("train " + (dir / "imported/config.toml") + " --out " + (dir / "run") +
             " --set data.dir=" + (dir / "data") +
             " --set train.max_steps=5 --set train.precision=fp32 --set train.threads=1"
             " --set train.batch_seqs=" +
             std::to_string(kBatchSeqs) + " --set train.seed=" + std::to_string(kSeed) +
             " --set optim.lr=1e-2 --set optim.warmup_steps=0 --set eval.interval=0"
             " --set checkpoint.interval=5 --set log.interval=1 --set log.progress=off");
  ASSERT_EQ(r.code, 0) << r.output;
}

// Step 1's loss is the loss transformers' own model has on that batch (so the
// run started from the imported weights, on data in the model's vocabulary),
// and every imported tensor trained.
void expect_started_from_import(const TempDir& dir, const Config& cfg, const std::string& trained) {
  BatchLoader loader(dir / "data", "train", cfg.model.seq_len, kBatchSeqs, 0, 1, kSeed, 0);
  const double expected = hf_loss(dir / "hf", loader.next(), dir, cfg.model.vocab_size);
  const double first = first_step_loss(dir / "run");
  std::cout << "step 1 loss " << first << ", transformers' loss on that batch " << expected << "\n";
  EXPECT_NEAR(first, expected, 1e-5 * expected);
  const LoadedCheckpoint before = load_checkpoint(dir / "imported/checkpoints/step_00000000");
  const LoadedCheckpoint after = load_checkpoint(trained);
  for (const auto& [name, t] : before.tensors) {
    EXPECT_FALSE(torch::equal(t, after.tensors.at(name))) << name << " did not train";
  }
}

TEST(ImportedModelE2E, TrainsFromTheImportAndTransformersReadsTheExport) {
  ASSERT_TRUE(testing::transformers_available())
      << "transformers is not installed for " << testing::kPython
      << " (launch/install-deps.sh installs launch/requirements.txt)";
  TempDir dir;
  const auto val_texts = corpus_documents(0, kValDocs);
  ASSERT_NO_FATAL_FAILURE(import_and_prep(dir, val_texts));
  ASSERT_NO_FATAL_FAILURE(train_from_import(dir));
  const Config cfg = load_config(dir / "imported/config.toml");
  const std::string trained = dir / "run/checkpoints/step_00000005";
  expect_started_from_import(dir, cfg, trained);
  const MoelabResult r = moelab("export " + trained + " --format hf --out " + (dir / "export"));
  ASSERT_EQ(r.code, 0) << r.output;
  testing::expect_transformers_reads_export(dir, cfg.model.seq_len, cfg.model.vocab_size, trained,
                                            val_texts);
}

}  // namespace
}  // namespace moelab
