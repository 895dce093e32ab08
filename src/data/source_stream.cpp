#include "data/source_stream.h"

#include <algorithm>

#include "data/seeded_permutation.h"
#include "data/token_stream.h"
#include "util/error.h"

namespace moelab {

SourceStream::SourceStream(const std::string& dataset_dir, const std::string& split, int64_t window,
                           int64_t max_tokens, int64_t global_batch, uint64_t seed, size_t index)
    : tokens_(std::make_unique<WindowedTokens>(dataset_dir, split, window)),
      seed_(seed),
      // Source 0 draws epoch e from stream e; the others from streams far beyond any epoch.
      stream_base_(int64_t(index) << 40) {
  windows_ = tokens_->num_windows();
  if (max_tokens > 0) windows_ = std::min(windows_, max_tokens / window);
  epoch_windows_ = windows_ / global_batch * global_batch;
  if (epoch_windows_ == 0) {
    throw InputError(tokens_->info().manifest_path + ": " +
                     (max_tokens > 0
                          ? "max_unique_tokens = " + std::to_string(max_tokens) + " keeps "
                          : std::string("split has ")) +
                     std::to_string(windows_) + " windows of " + std::to_string(window) +
                     " tokens, fewer than one global batch of " + std::to_string(global_batch));
  }
}

SourceStream::~SourceStream() = default;

const DatasetInfo& SourceStream::info() const {
  return tokens_->info();
}

void SourceStream::read(int64_t k, int64_t* out) {
  const int64_t epoch = k / epoch_windows_;
  if (order_epoch_ != epoch) {
    order_ = seeded_permutation(windows_, seed_, stream_base_ + epoch);
    order_epoch_ = epoch;
  }
  tokens_->read_window(order_[k % epoch_windows_], out);
}

}  // namespace moelab
