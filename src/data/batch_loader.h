// Training batches for one data-parallel rank. Windows of seq_len+1 tokens
// (non-overlapping, stride seq_len+1) are visited in a global order that depends
// only on (seed, epoch); global batch b of an epoch is windows [b*B, (b+1)*B) of
// that order (a last partial batch is dropped), and rank r takes rows
// [r*B/dp, (r+1)*B/dp). So the concatenation of all ranks' slices is the same
// for every dp_size, and (epoch, position) is all a checkpoint needs to resume.
// A data budget (max_tokens > 0) keeps only the split's first max_tokens /
// (seq_len+1) windows, which every epoch then reshuffles: data reuse.
#pragma once

#include <torch/torch.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "data/dataset_info.h"

namespace moelab {

class WindowedTokens;

struct LoaderState {
  int64_t epoch = 0;
  int64_t position = 0;  // global batches already consumed in this epoch
};

class BatchLoader {
 public:
  // prefetch = batches read ahead on a background thread (0 = read in next()).
  // max_tokens > 0: only the split's first max_tokens tokens (whole windows).
  // InputError if global_batch_seqs % dp_size != 0, the split (or the budget)
  // has fewer windows than one global batch, or a shard fails verification.
  BatchLoader(const std::string& dataset_dir, const std::string& split, int64_t seq_len,
              int64_t global_batch_seqs, int dp_rank, int dp_size, uint64_t seed, int prefetch,
              int64_t max_tokens = 0);
  ~BatchLoader();
  BatchLoader(const BatchLoader&) = delete;
  BatchLoader& operator=(const BatchLoader&) = delete;

  // [global_batch_seqs / dp_size, seq_len + 1] int64: this rank's slice of the next global batch.
  torch::Tensor next();
  // State after the last batch returned by next() (epoch rolls over at its end).
  LoaderState state() const { return state_; }
  // The next next() returns exactly what an uninterrupted loader would.
  void restore(const LoaderState& s);
  int64_t windows_per_epoch() const;
  int64_t batches_per_epoch() const { return batches_per_epoch_; }
  const DatasetInfo& info() const;

 private:
  torch::Tensor read_batch(const LoaderState& at);
  LoaderState advance(LoaderState at) const;
  void start_prefetch(const LoaderState& from);
  void stop_prefetch();
  void prefetch_loop();

  std::unique_ptr<WindowedTokens> tokens_;
  int64_t global_batch_;
  int64_t local_batch_;
  int dp_rank_;
  uint64_t seed_;
  int prefetch_;
  int64_t windows_ = 0;  // the windows an epoch visits
  int64_t batches_per_epoch_ = 0;
  LoaderState state_;

  // The permutation of the epoch being read; touched only by the reading thread.
  int64_t order_epoch_ = -1;
  std::vector<int64_t> order_;

  std::thread worker_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<torch::Tensor> queue_;
  LoaderState produce_at_;
  bool stopping_ = false;
  std::exception_ptr worker_error_;
};

}  // namespace moelab
