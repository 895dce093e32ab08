// Validation windows: a fixed, ordered list of non-overlapping seq_len+1 token
// windows from the start of the split, so every evaluation sees the same tokens.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>

#include "data/dataset_info.h"

namespace moelab {

class WindowedTokens;

class ValidationSet {
 public:
  // max_windows = 0 keeps every window. InputError if the split has no window.
  ValidationSet(const std::string& dataset_dir, const std::string& split, int64_t seq_len,
                int64_t max_windows);
  ~ValidationSet();

  int64_t size() const { return size_; }
  // [end - begin, seq_len + 1] int64.
  at::Tensor windows(int64_t begin, int64_t end) const;
  const DatasetInfo& info() const;

 private:
  std::unique_ptr<WindowedTokens> tokens_;
  int64_t size_ = 0;
};

}  // namespace moelab
