#include "comm/failure.h"

#include <torch/torch.h>
#include <cstdint>

#include "util/error.h"

namespace moelab {

std::string agree_on_error(Communicator& group, const std::string& local_error) {
  // The max of (size - rank) over failing ranks identifies the lowest one.
  torch::Tensor flag = torch::tensor(
      {local_error.empty() ? int64_t{0} : int64_t{group.size() - group.rank()}}, torch::kLong);
  group.all_reduce_max(flag);
  const int64_t max_flag = flag.item<int64_t>();
  if (max_flag == 0) return "";
  const int first = static_cast<int>(group.size() - max_flag);

  torch::Tensor length = torch::tensor({static_cast<int64_t>(local_error.size())}, torch::kLong);
  group.broadcast(length, first);
  torch::Tensor text = torch::empty({length.item<int64_t>()}, torch::kByte);
  if (group.rank() == first) {
    std::copy(local_error.begin(), local_error.end(), text.data_ptr<uint8_t>());
  }
  group.broadcast(text, first);

  if (!local_error.empty()) return local_error;
  const auto* chars = reinterpret_cast<const char*>(text.data_ptr<uint8_t>());
  return "rank " + std::to_string(first) + " reported: " + std::string(chars, chars + text.numel());
}

void agree_or_throw(Communicator& group, const std::string& local_error) {
  const std::string message = agree_on_error(group, local_error);
  if (!message.empty()) throw InputError(message);
}

}  // namespace moelab
