// One source of the training mixture as an endless stream of windows of
// seq_len+1 tokens. Epoch e visits the first epoch_windows() entries of a
// permutation of the source's windows seeded by (seed, source index, e); the
// stream's k-th window is entry k % epoch_windows() of epoch k / epoch_windows().
// An epoch is a whole number of global batches (the rest of the windows wait
// for a later epoch's shuffle), so a mixture of one reads global batch b as
// windows [b*B, (b+1)*B) of its epoch's order.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/dataset_info.h"

namespace moelab {

class WindowedTokens;

class SourceStream {
 public:
  // max_tokens > 0: only the split's first max_tokens tokens (whole windows).
  // InputError if the split (or the budget) has fewer windows than one global batch.
  SourceStream(const std::string& dataset_dir, const std::string& split, int64_t window,
               int64_t max_tokens, int64_t global_batch, uint64_t seed, size_t index);
  ~SourceStream();

  const DatasetInfo& info() const;
  int64_t windows() const { return windows_; }  // the windows an epoch draws from
  int64_t epoch_windows() const { return epoch_windows_; }
  // Copies stream window k into `out`. One thread at a time (it keeps the
  // permutation of the epoch last read).
  void read(int64_t k, int64_t* out);

 private:
  std::unique_ptr<WindowedTokens> tokens_;
  uint64_t seed_;
  int64_t stream_base_;  // RNG stream of epoch e: stream_base_ + e
  int64_t windows_ = 0;
  int64_t epoch_windows_ = 0;
  int64_t order_epoch_ = -1;
  std::vector<int64_t> order_;
};

}  // namespace moelab
