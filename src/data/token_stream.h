// The tokens of one split as a single stream (shards concatenated in manifest
// order), cut into non-overlapping windows of `window` tokens. A window may
// straddle two shards; the tail shorter than a window is never used.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/dataset_info.h"
#include "data/shard_reader.h"

namespace moelab {

class WindowedTokens {
 public:
  // Verifies every shard against the manifest before use.
  WindowedTokens(const std::string& dataset_dir, const std::string& split, int64_t window);

  const DatasetInfo& info() const { return info_; }
  int64_t num_windows() const { return num_windows_; }
  int64_t window() const { return window_; }
  // Copies window `index` into `out` (window() int64 values).
  void read_window(int64_t index, int64_t* out) const;
  // [indices.size(), window] int64 tensor of the given windows, in that order.
  at::Tensor gather(const std::vector<int64_t>& indices) const;

 private:
  DatasetInfo info_;
  int64_t window_;
  int64_t num_windows_ = 0;
  std::vector<std::unique_ptr<ShardReader>> shards_;
  std::vector<int64_t> shard_starts_;  // global index of each shard's first token
};

}  // namespace moelab
