#include "data/shard_sink.h"

#include <cstdio>
#include <filesystem>

#include "data/checksum.h"
#include "util/atomic_file.h"

namespace moelab {

namespace fs = std::filesystem;

ShardSink::ShardSink(std::string split_dir, ShardHeader header_template, int64_t target_tokens)
    : split_dir_(std::move(split_dir)),
      header_(std::move(header_template)),
      target_tokens_(target_tokens) {
  manifest_.format_version = header_.format_version;
  manifest_.split = header_.split;
  manifest_.vocab_size = header_.vocab_size;
  manifest_.eos_id = header_.eos_id;
  manifest_.tokenizer_checksum = header_.tokenizer_checksum;
}

void ShardSink::add_document(const uint32_t* tokens, int64_t count) {
  tokens_.insert(tokens_.end(), tokens, tokens + count);
  offsets_.push_back(tokens_.size());
  if (static_cast<int64_t>(tokens_.size()) >= target_tokens_) flush_shard();
}

void ShardSink::flush_shard() {
  if (tokens_.empty()) return;
  fs::create_directories(split_dir_);
  char name[32];
  std::snprintf(name, sizeof(name), "shard_%05zu.h5", manifest_.shards.size());
  const std::string path = (fs::path(split_dir_) / name).string();
  header_.token_count = static_cast<int64_t>(tokens_.size());
  write_shard(path, header_, tokens_, offsets_);
  const int64_t docs = static_cast<int64_t>(offsets_.size()) - 1;
  manifest_.shards.push_back({name, header_.token_count, docs, checksum_hex(xxhash64_file(path))});
  docs_written_ += docs;
  tokens_.clear();
  offsets_.assign(1, 0);
}

Manifest ShardSink::finish() {
  flush_shard();
  write_file_atomically((fs::path(split_dir_) / "manifest.json").string(),
                        manifest_to_json(manifest_));
  return manifest_;
}

}  // namespace moelab
