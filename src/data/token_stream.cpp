#include "data/token_stream.h"

#include <torch/torch.h>
#include <algorithm>

#include "util/error.h"

namespace moelab {

WindowedTokens::WindowedTokens(const std::string& dataset_dir, const std::string& split,
                               int64_t window)
    : info_(read_dataset_info(dataset_dir, split)), window_(window) {
  if (window <= 1) throw InputError("window length must be at least 2 tokens (seq_len >= 1)");
  verify_shards(info_);
  int64_t start = 0;
  for (const auto& path : info_.shards) {
    shards_.push_back(std::make_unique<ShardReader>(path));
    shard_starts_.push_back(start);
    start += shards_.back()->header().token_count;
  }
  num_windows_ = start / window_;
}

void WindowedTokens::read_window(int64_t index, int64_t* out) const {
  int64_t position = index * window_;
  int64_t remaining = window_;
  // The last shard starting at or before `position`.
  size_t shard = std::upper_bound(shard_starts_.begin(), shard_starts_.end(), position) -
                 shard_starts_.begin() - 1;
  while (remaining > 0) {
    const ShardReader& reader = *shards_[shard];
    const int64_t offset = position - shard_starts_[shard];
    const int64_t count = std::min(remaining, reader.header().token_count - offset);
    reader.read_tokens(offset, count, out);
    out += count, position += count, remaining -= count;
    ++shard;
  }
}

torch::Tensor WindowedTokens::gather(const std::vector<int64_t>& indices) const {
  auto batch = torch::empty({static_cast<int64_t>(indices.size()), window_}, torch::kInt64);
  int64_t* data = batch.data_ptr<int64_t>();
  for (size_t row = 0; row < indices.size(); ++row) read_window(indices[row], data + row * window_);
  return batch;
}

}  // namespace moelab
