// manifest.json of one split: what the shards are and how to trust them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace moelab {

struct ManifestShard {
  std::string name;  // file name inside the split folder
  int64_t tokens = 0;
  int64_t docs = 0;
  std::string checksum;  // xxhash64 of the whole file, hex
};

struct Manifest {
  int64_t format_version = 0;
  std::string split;
  int64_t vocab_size = 0;
  int64_t eos_id = 0;
  std::string tokenizer_checksum;
  std::vector<ManifestShard> shards;

  int64_t num_tokens() const;
  int64_t num_docs() const;
};

// Deterministic text (sorted keys, no timestamps), so equal datasets give equal bytes.
std::string manifest_to_json(const Manifest& manifest);
// InputError naming `path` when it is missing, not JSON, or lacks a field.
Manifest read_manifest(const std::string& path);

}  // namespace moelab
