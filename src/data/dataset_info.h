// What the trainer needs to know about one split of a prepared dataset, read
// from its manifest, plus the checks that make a dataset trustworthy.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace moelab {

struct DatasetInfo {
  int64_t vocab_size = 0;
  int64_t eos_id = 0;
  std::string tokenizer_checksum;
  int64_t num_tokens = 0;
  int64_t num_docs = 0;
  std::vector<std::string> shards;  // full paths, in order
  // Added members:
  std::string split;
  std::string manifest_path;
  std::vector<int64_t> shard_tokens;         // per shard, as the manifest says
  std::vector<std::string> shard_checksums;  // per shard, xxhash64 hex
};

// Reads and validates <dataset_dir>/<split>/manifest.json (format version,
// fields, shard files present, tokenizer file checksum if the dataset holds one).
// InputError naming the file on problems.
DatasetInfo read_dataset_info(const std::string& dataset_dir, const std::string& split);

// Opens every shard: its xxhash64 must match the manifest and its header must
// agree with the manifest (format, vocab, eos, tokenizer, token count).
// InputError naming the shard otherwise.
void verify_shards(const DatasetInfo& info);

// InputError when two splits were not encoded by the same tokenizer.
void check_same_tokenizer(const DatasetInfo& a, const DatasetInfo& b);

// InputError when the model's vocabulary cannot hold the dataset's ids. A
// larger one is a padded embedding, as Hugging Face models ship it (Qwen2/3
// and OLMoE pad theirs past their tokenizer's size): rows no id reaches.
void check_vocab_matches(const DatasetInfo& info, int64_t model_vocab_size);

}  // namespace moelab
