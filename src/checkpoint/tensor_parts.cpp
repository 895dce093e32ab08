#include "checkpoint/tensor_parts.h"

#include <torch/torch.h>

namespace moelab {

TensorPart part_of(const std::string& name, const torch::Tensor& tensor, int64_t begin,
                   int64_t length) {
  TORCH_CHECK(tensor.is_contiguous(), "checkpoint tensor '", name, "' must be contiguous");
  TensorPart part;
  part.name = name;
  part.shape.assign(tensor.sizes().begin(), tensor.sizes().end());
  part.begin = begin;
  part.data = tensor.detach().view(-1).narrow(0, begin, length);
  return part;
}

TensorPart whole_part(const std::string& name, const torch::Tensor& tensor) {
  return part_of(name, tensor, 0, tensor.numel());
}

int64_t numel_of(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

}  // namespace moelab
