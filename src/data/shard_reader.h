// Reads one token shard: checks its header, then serves token ranges by HDF5
// hyperslab so a shard is never loaded whole.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/hdf5_handle.h"
#include "data/shard_format.h"

namespace moelab {

class ShardReader {
 public:
  // Opens `path` and reads its header; InputError naming the file when it is
  // not a readable shard (e.g. truncated) or has another format version.
  explicit ShardReader(const std::string& path);

  const ShardHeader& header() const { return header_; }
  const std::string& path() const { return path_; }
  // Copies tokens [begin, begin + count) into `out` as int64.
  void read_tokens(int64_t begin, int64_t count, int64_t* out) const;
  std::vector<uint64_t> doc_offsets() const;

 private:
  std::string path_;
  Hdf5Handle file_;
  Hdf5Handle tokens_;
  ShardHeader header_;
};

}  // namespace moelab
