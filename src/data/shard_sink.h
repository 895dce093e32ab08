// Collects the documents of one split in order and writes them as shards of
// about `target_tokens` tokens (documents are never split across shards), then
// the split's manifest.json. Runs on rank 0 only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/manifest.h"
#include "data/shard_format.h"

namespace moelab {

class ShardSink {
 public:
  ShardSink(std::string split_dir, ShardHeader header_template, int64_t target_tokens);

  void add_document(const uint32_t* tokens, int64_t count);
  // Writes the last shard and manifest.json; returns the manifest written.
  Manifest finish();

  int64_t num_docs() const { return docs_written_ + static_cast<int64_t>(offsets_.size()) - 1; }

 private:
  void flush_shard();

  std::string split_dir_;
  ShardHeader header_;
  int64_t target_tokens_;
  std::vector<uint32_t> tokens_;
  std::vector<uint64_t> offsets_{0};
  int64_t docs_written_ = 0;
  Manifest manifest_;
};

}  // namespace moelab
