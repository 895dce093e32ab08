#include "comm/gather_strings.h"

#include <torch/torch.h>

namespace moelab {

std::vector<std::string> gather_strings(Communicator& group, const std::string& text, int root) {
  auto longest = torch::tensor({int64_t(text.size())}, torch::kLong);
  group.all_reduce_max(longest);
  const int64_t width = longest.item<int64_t>() + 1;  // a NUL ends each row
  torch::Tensor row = torch::zeros({1, width}, torch::kByte);
  std::copy(text.begin(), text.end(), row.data_ptr<uint8_t>());
  const torch::Tensor rows = group.gather(row, root);
  std::vector<std::string> out;
  if (!rows.defined()) return out;
  for (int64_t r = 0; r < rows.size(0); ++r) {
    out.emplace_back(reinterpret_cast<const char*>(rows[r].data_ptr<uint8_t>()));
  }
  return out;
}

}  // namespace moelab
