#include "comm/local_communicator.h"

#include <stdexcept>

#include "comm/collective_checks.h"

namespace moelab {

torch::Tensor LocalCommunicator::all_gather(const torch::Tensor& t) {
  if (t.dim() < 1)
    throw std::invalid_argument(comm_error("all_gather", 0, "tensor must have dim 0"));
  return t.clone();
}

torch::Tensor LocalCommunicator::all_to_all_v(const torch::Tensor& send,
                                              const std::vector<int64_t>& send_rows,
                                              const std::vector<int64_t>& recv_rows) {
  check_all_to_all_splits("all_to_all_v", 0, 1, send, send_rows, recv_rows);
  if (recv_rows[0] != send_rows[0]) {
    throw std::invalid_argument(
        comm_error("all_to_all_v", 0, "a world of one must receive what it sends"));
  }
  return send.clone();
}

void LocalCommunicator::broadcast(torch::Tensor&, int root) {
  check_root("broadcast", 0, 1, root);
}

}  // namespace moelab
