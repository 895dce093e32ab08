#include "data/batch_loader.h"

#include <torch/torch.h>
#include <algorithm>

#include "data/source_stream.h"
#include "util/error.h"

namespace moelab {
namespace {

std::vector<double> weights_of(const std::vector<LoaderSource>& sources) {
  std::vector<double> weights;
  for (const auto& s : sources) weights.push_back(s.weight);
  return weights;
}

}  // namespace

BatchLoader::BatchLoader(const std::vector<LoaderSource>& sources, const std::string& split,
                         int64_t seq_len, int64_t global_batch_seqs, int dp_rank, int dp_size,
                         uint64_t seed, int prefetch)
    : schedule_(weights_of(sources)),
      window_(seq_len + 1),
      global_batch_(global_batch_seqs),
      dp_rank_(dp_rank),
      prefetch_(prefetch) {
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
  for (size_t i = 0; i < sources.size(); ++i) {
    sources_.push_back(std::make_unique<SourceStream>(
        sources[i].dir, split, seq_len + 1, sources[i].max_tokens, global_batch_, seed, i));
    check_same_tokenizer(sources_.front()->info(), sources_.back()->info());
  }
  state_ = schedule_.at(0);
  start_prefetch(state_);
}

BatchLoader::BatchLoader(const std::string& dataset_dir, const std::string& split, int64_t seq_len,
                         int64_t global_batch_seqs, int dp_rank, int dp_size, uint64_t seed,
                         int prefetch, int64_t max_tokens)
    : BatchLoader({LoaderSource{dataset_dir, 1.0, max_tokens}}, split, seq_len, global_batch_seqs,
                  dp_rank, dp_size, seed, prefetch) {}

BatchLoader::~BatchLoader() {
  stop_prefetch();
}

int64_t BatchLoader::epoch(size_t source) const {
  return state_.taken[source] / sources_[source]->epoch_windows();
}

int64_t BatchLoader::windows_per_epoch(size_t source) const {
  return sources_[source]->windows();
}

int64_t BatchLoader::sequences_per_epoch(size_t source) const {
  return sources_[source]->epoch_windows();
}

const DatasetInfo& BatchLoader::info() const {
  return sources_.front()->info();
}

MixturePosition BatchLoader::advance(MixturePosition at) const {
  for (int64_t i = 0; i < global_batch_; ++i) schedule_.next(&at);
  return at;
}

torch::Tensor BatchLoader::read_batch(const MixturePosition& at) {
  MixturePosition pos = at;
  // Ranks before this one take the batch's first rows.
  for (int64_t i = 0; i < dp_rank_ * local_batch_; ++i) schedule_.next(&pos);
  torch::Tensor batch = torch::empty({local_batch_, window_}, torch::kInt64);
  int64_t* data = batch.data_ptr<int64_t>();
  for (int64_t row = 0; row < local_batch_; ++row) {
    const size_t source = schedule_.next(&pos);
    sources_[source]->read(pos.taken[source] - 1, data + row * window_);
  }
  return batch;
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
  if (s.samples < 0) {
    throw InputError("loader state of " + std::to_string(s.samples) +
                     " samples consumed; expected a count >= 0");
  }
  stop_prefetch();
  state_ = schedule_.at(s.samples);
  start_prefetch(state_);
}

void BatchLoader::start_prefetch(const MixturePosition& from) {
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
      MixturePosition at;
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
