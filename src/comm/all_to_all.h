// All-to-all-v as an autograd function: the gradient of a row exchange is the
// opposite exchange, so backward sends each received row's gradient back to
// the rank that sent the row. Every rank of the group must run backward
// through it (it is a collective), which holds when each rank's loss depends
// on the output.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "comm/communicator.h"

namespace moelab {

class AllToAllV : public torch::autograd::Function<AllToAllV> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& send,
                               std::shared_ptr<Communicator> group,
                               const std::vector<int64_t>& send_rows,
                               const std::vector<int64_t>& recv_rows);
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs);
};

// Differentiable `group->all_to_all_v(send, send_rows, recv_rows)`.
torch::Tensor all_to_all_v(const torch::Tensor& send, const std::shared_ptr<Communicator>& group,
                           const std::vector<int64_t>& send_rows,
                           const std::vector<int64_t>& recv_rows);

}  // namespace moelab
