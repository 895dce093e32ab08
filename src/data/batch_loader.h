// Training batches for one data-parallel rank, drawn from a mixture of
// prepared datasets (one dataset is a mixture of one). Global sample g (the
// g-th sequence since the run began) comes from the source the mixture schedule
// gives it (mixture_schedule.h) and is the next window of that source's stream
// (source_stream.h); global batch b is samples [b*B, (b+1)*B) and rank r takes
// rows [r*B/dp, (r+1)*B/dp). Every choice depends on g alone, so the
// concatenation of all ranks' slices is the same for every dp_size, and the
// sample count is all a checkpoint needs to resume.
#pragma once

#include <ATen/core/Tensor.h>

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
#include "data/mixture_schedule.h"

namespace moelab {

class SourceStream;

struct LoaderState {
  int64_t samples = 0;  // global sequences consumed since the run began
};

struct LoaderSource {
  std::string dir;
  double weight = 1.0;
  int64_t max_tokens = 0;  // > 0: only the split's first max_tokens tokens (whole windows)
};

class BatchLoader {
 public:
  // prefetch = batches read ahead on a background thread (0 = read in next()).
  // InputError if global_batch_seqs % dp_size != 0, a source's split (or its
  // budget) has fewer windows than one global batch, a shard fails
  // verification, or two sources were encoded by different tokenizers.
  BatchLoader(const std::vector<LoaderSource>& sources, const std::string& split, int64_t seq_len,
              int64_t global_batch_seqs, int dp_rank, int dp_size, uint64_t seed, int prefetch);
  // One dataset.
  BatchLoader(const std::string& dataset_dir, const std::string& split, int64_t seq_len,
              int64_t global_batch_seqs, int dp_rank, int dp_size, uint64_t seed, int prefetch,
              int64_t max_tokens = 0);
  ~BatchLoader();
  BatchLoader(const BatchLoader&) = delete;
  BatchLoader& operator=(const BatchLoader&) = delete;

  // [global_batch_seqs / dp_size, seq_len + 1] int64: this rank's slice of the next global batch.
  at::Tensor next();
  // State after the last batch returned by next().
  LoaderState state() const { return {state_.samples}; }
  // The next next() returns exactly what an uninterrupted loader would.
  void restore(const LoaderState& s);
  // Sequences each source gave so far, in source order.
  const std::vector<int64_t>& taken() const { return state_.taken; }
  // The epoch source s is in: its sequences taken / sequences an epoch.
  int64_t epoch(size_t source = 0) const;
  // The windows an epoch of source s draws from, and how many it takes.
  int64_t windows_per_epoch(size_t source = 0) const;
  int64_t sequences_per_epoch(size_t source = 0) const;
  // The first source's split (every source shares its tokenizer).
  const DatasetInfo& info() const;

 private:
  at::Tensor read_batch(const MixturePosition& at);
  MixturePosition advance(MixturePosition at) const;
  void start_prefetch(const MixturePosition& from);
  void stop_prefetch();
  void prefetch_loop();

  MixtureSchedule schedule_;
  std::vector<std::unique_ptr<SourceStream>> sources_;  // touched only by the reading thread
  int64_t window_;                                      // seq_len + 1 tokens
  int64_t global_batch_;
  int64_t local_batch_;
  int dp_rank_;
  int prefetch_;
  MixturePosition state_;

  std::thread worker_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<at::Tensor> queue_;
  MixturePosition produce_at_;
  bool stopping_ = false;
  std::exception_ptr worker_error_;
};

}  // namespace moelab
