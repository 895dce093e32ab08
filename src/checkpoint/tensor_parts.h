// What one rank writes to, or reads from, a distributed checkpoint: parts of
// named tensors, each a range of the tensor's elements in row-major order.
// Ranks write the parts they own (run_checkpoint.h); a rank resuming at another
// layout asks for the parts it needs, which may span several ranks' files.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

namespace moelab {

struct TensorPart {
  std::string name;
  std::vector<int64_t> shape;  // the whole tensor's
  int64_t begin = 0;           // of the part's elements, the tensor flattened
  at::Tensor data;             // 1-D, the part's elements (a view to write from or read into)
  bool optional = false;       // reading: a checkpoint without this tensor skips it
};
using TensorParts = std::vector<TensorPart>;

// Elements [begin, begin + length) of `tensor` (contiguous) as a part named
// `name`, its data a view of the tensor's.
TensorPart part_of(const std::string& name, const at::Tensor& tensor, int64_t begin,
                   int64_t length);
// The whole tensor as one part.
TensorPart whole_part(const std::string& name, const at::Tensor& tensor);

int64_t numel_of(const std::vector<int64_t>& shape);

}  // namespace moelab
