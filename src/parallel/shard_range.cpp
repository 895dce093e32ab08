#include "parallel/shard_range.h"

#include <algorithm>

namespace moelab {

ShardRange shard_range(int64_t numel, int64_t ranks, int64_t rank) {
  ShardRange r;
  r.chunk = (numel + ranks - 1) / ranks;
  r.begin = std::min(numel, rank * r.chunk);
  r.length = std::min(numel, r.begin + r.chunk) - r.begin;
  return r;
}

void copy_into_rows(const torch::Tensor& values, torch::Tensor rows) {
  const torch::Tensor flat = values.reshape(-1);
  const int64_t chunk = rows.size(1);
  const int64_t full = flat.numel() / chunk;
  const int64_t rest = flat.numel() - full * chunk;
  rows.narrow(0, 0, full).copy_(flat.narrow(0, 0, full * chunk).view({full, chunk}));
  if (full == rows.size(0)) return;
  torch::Tensor partial = rows[full];
  partial.narrow(0, 0, rest).copy_(flat.narrow(0, full * chunk, rest));
  partial.narrow(0, rest, chunk - rest).zero_();
  rows.narrow(0, full + 1, rows.size(0) - full - 1).zero_();
}

}  // namespace moelab
