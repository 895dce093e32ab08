#include "data/validation_set.h"

#include <torch/torch.h>
#include <numeric>
#include <vector>

#include "data/token_stream.h"
#include "util/error.h"

namespace moelab {

ValidationSet::ValidationSet(const std::string& dataset_dir, const std::string& split,
                             int64_t seq_len, int64_t max_windows)
    : tokens_(std::make_unique<WindowedTokens>(dataset_dir, split, seq_len + 1)) {
  if (max_windows < 0) throw InputError("eval.max_windows must be >= 0");
  size_ = tokens_->num_windows();
  if (max_windows > 0) size_ = std::min(size_, max_windows);
  if (size_ == 0) {
    throw InputError(tokens_->info().manifest_path + ": split has fewer than " +
                     std::to_string(seq_len + 1) + " tokens, not one validation window");
  }
}

ValidationSet::~ValidationSet() = default;

const DatasetInfo& ValidationSet::info() const {
  return tokens_->info();
}

torch::Tensor ValidationSet::windows(int64_t begin, int64_t end) const {
  if (begin < 0 || end > size_ || begin > end) {
    throw InputError("validation windows [" + std::to_string(begin) + ", " + std::to_string(end) +
                     ") are outside [0, " + std::to_string(size_) + ")");
  }
  std::vector<int64_t> indices(end - begin);
  std::iota(indices.begin(), indices.end(), begin);
  return tokens_->gather(indices);
}

}  // namespace moelab
