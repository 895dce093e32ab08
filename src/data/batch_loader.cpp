#include "data/batch_loader.h"

#include <algorithm>

#include "data/seeded_permutation.h"
#include "data/token_stream.h"
#include "util/error.h"

namespace moelab {

BatchLoader::BatchLoader(const std::string& dataset_dir, const std::string& split, int64_t seq_len,
                         int64_t global_batch_seqs, int dp_rank, int dp_size, uint64_t seed,
                         int prefetch, int64_t max_tokens)
    : global_batch_(global_batch_seqs), dp_rank_(dp_rank), seed_(seed), prefetch_(prefetch) {
  if (dp_size <= 0 || dp_rank < 0 || dp_rank >= dp_size) {
    throw InputError("data-parallel rank " + std::to_string(dp_rank) + " is outside [0, " +
                     std::to_string(dp_size) + ")");
  }
  if (global_batch_seqs <= 0 || global_batch_seqs % dp_size != 0) {
    throw InputError("global batch of " + std::to_string(global_batch_seqs) +
                     " sequences must be a positive multiple of the data-parallel size " +
                     std::to_string(dp_size));
  }
  if (prefetch < 0) throw InputError("data.prefetch must be >= 0");
  local_batch_ = global_batch_seqs / dp_size;
  tokens_ = std::make_unique<WindowedTokens>(dataset_dir, split, seq_len + 1);
  windows_ = tokens_->num_windows();
  if (max_tokens > 0) windows_ = std::min(windows_, max_tokens / (seq_len + 1));
  batches_per_epoch_ = windows_ / global_batch_;
  if (batches_per_epoch_ == 0) {
    throw InputError(
        tokens_->info().manifest_path + ": " +
        (max_tokens > 0 ? "data.max_unique_tokens = " + std::to_string(max_tokens) + " keeps "
                        : std::string("split has ")) +
        std::to_string(windows_) + " windows of " + std::to_string(seq_len + 1) +
        " tokens, fewer than one global batch of " + std::to_string(global_batch_seqs));
  }
  start_prefetch(state_);
}

BatchLoader::~BatchLoader() {
  stop_prefetch();
}

int64_t BatchLoader::windows_per_epoch() const {
  return windows_;
}

const DatasetInfo& BatchLoader::info() const {
  return tokens_->info();
}

LoaderState BatchLoader::advance(LoaderState at) const {
  if (++at.position == batches_per_epoch_) at = {at.epoch + 1, 0};
  return at;
}

torch::Tensor BatchLoader::read_batch(const LoaderState& at) {
  if (order_epoch_ != at.epoch) {
    order_ = seeded_permutation(windows_, seed_, at.epoch);
    order_epoch_ = at.epoch;
  }
  const int64_t first = at.position * global_batch_ + dp_rank_ * local_batch_;
  return tokens_->gather(
      std::vector<int64_t>(order_.begin() + first, order_.begin() + first + local_batch_));
}

torch::Tensor BatchLoader::next() {
  torch::Tensor batch;
  if (prefetch_ == 0) {
    batch = read_batch(state_);
  } else {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return !queue_.empty() || worker_error_; });
    if (queue_.empty()) std::rethrow_exception(worker_error_);
    batch = std::move(queue_.front());
    queue_.pop_front();
    changed_.notify_all();
  }
  state_ = advance(state_);
  return batch;
}

void BatchLoader::restore(const LoaderState& s) {
  if (s.epoch < 0 || s.position < 0 || s.position > batches_per_epoch_) {
    throw InputError("loader state (epoch " + std::to_string(s.epoch) + ", position " +
                     std::to_string(s.position) + ") does not fit this dataset's " +
                     std::to_string(batches_per_epoch_) + " batches per epoch");
  }
  stop_prefetch();
  state_ = s.position == batches_per_epoch_ ? LoaderState{s.epoch + 1, 0} : s;
  start_prefetch(state_);
}

void BatchLoader::start_prefetch(const LoaderState& from) {
  if (prefetch_ == 0) return;
  queue_.clear();
  worker_error_ = nullptr;
  stopping_ = false;
  produce_at_ = from;
  worker_ = std::thread([this] { prefetch_loop(); });
}

void BatchLoader::stop_prefetch() {
  if (!worker_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  worker_.join();
}

void BatchLoader::prefetch_loop() {
  try {
    while (true) {
      LoaderState at;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        changed_.wait(lock, [&] { return stopping_ || queue_.size() < size_t(prefetch_); });
        if (stopping_) return;
        at = produce_at_;
      }
      // Read outside the lock so next() can take finished batches meanwhile.
      torch::Tensor batch = read_batch(at);
      std::lock_guard<std::mutex> lock(mutex_);
      queue_.push_back(std::move(batch));
      produce_at_ = advance(at);
      changed_.notify_all();
    }
  } catch (...) {
    std::lock_guard<std::mutex> lock(mutex_);
    worker_error_ = std::current_exception();
    changed_.notify_all();
  }
}

}  // namespace moelab
