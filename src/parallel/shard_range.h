// How ZeRO-1 splits a parameter over the ranks of its data-parallel group, the
// one rule the gradient reduce-scatter (grad_sync.h) and the sharded optimizer
// (optimizer_shards.h) share: rank r owns the flattened elements
// [r*chunk, min(numel, (r+1)*chunk)), chunk = ceil(numel / ranks). The last
// ranks' ranges may be short or empty.
#pragma once

#include <torch/torch.h>

#include <cstdint>

namespace moelab {

struct ShardRange {
  int64_t chunk = 0;   // every rank's range, padded: ceil(numel / ranks)
  int64_t begin = 0;   // this rank's first element
  int64_t length = 0;  // this rank's elements
};

ShardRange shard_range(int64_t numel, int64_t ranks, int64_t rank);

// Lays the flattened `values` out as `rows` [ranks, chunk] (row q is rank q's
// range), zero past the last value: a parameter's column block of a buffer
// whose row q a reduce-scatter hands to rank q.
void copy_into_rows(const torch::Tensor& values, torch::Tensor rows);

}  // namespace moelab
