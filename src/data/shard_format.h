// The on-disk shard format shared by the writer and the reader. A shard is one
// HDF5 file: dataset `tokens` (uint16 when the vocabulary fits, else uint32;
// 1-D, chunked), dataset `doc_offsets` (uint64, num_docs + 1 entries: where
// each document starts, then the token count) and the attributes below.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace moelab {

// Bump when the layout changes; readers refuse other versions.
inline constexpr int64_t kShardFormatVersion = 1;
// tokenizer_checksum of a dataset imported from token ids without a tokenizer
// file: its tokens cannot be decoded.
inline constexpr const char* kNoTokenizer = "none";
inline constexpr int64_t kTokensChunk = 1 << 16;

struct ShardHeader {
  int64_t format_version = kShardFormatVersion;
  int64_t vocab_size = 0;
  int64_t eos_id = 0;
  std::string tokenizer_checksum;
  std::string split;
  int64_t token_count = 0;
};

inline bool tokens_fit_uint16(int64_t vocab_size) {
  return vocab_size <= 65535;
}

// Writes a complete shard to `path` (via a temporary name). The file is
// byte-identical for identical contents: no timestamps are stored.
void write_shard(const std::string& path, const ShardHeader& header,
                 const std::vector<uint32_t>& tokens, const std::vector<uint64_t>& doc_offsets);

}  // namespace moelab
