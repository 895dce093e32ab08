#include "comm/all_to_all.h"

#include "util/trace_scope.h"

namespace moelab {
namespace {

// Carries the group through ctx->saved_data, which holds only IValues.
struct GroupHolder : torch::CustomClassHolder {
  explicit GroupHolder(std::shared_ptr<Communicator> g) : group(std::move(g)) {}
  std::shared_ptr<Communicator> group;
};

}  // namespace

torch::Tensor AllToAllV::forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& send,
                                 std::shared_ptr<Communicator> group,
                                 const std::vector<int64_t>& send_rows,
                                 const std::vector<int64_t>& recv_rows) {
  ctx->saved_data["group"] = c10::IValue::make_capsule(c10::make_intrusive<GroupHolder>(group));
  ctx->saved_data["send_rows"] = send_rows;
  ctx->saved_data["recv_rows"] = recv_rows;
  TraceScope range("all_to_all");  // where a rank waits for its peers' tokens
  return group->all_to_all_v(send, send_rows, recv_rows);
}

torch::autograd::variable_list AllToAllV::backward(torch::autograd::AutogradContext* ctx,
                                                   torch::autograd::variable_list grad_outputs) {
  auto holder =
      c10::static_intrusive_pointer_cast<GroupHolder>(ctx->saved_data["group"].toCapsule());
  const std::vector<int64_t> send_rows = ctx->saved_data["send_rows"].toIntVector();
  const std::vector<int64_t> recv_rows = ctx->saved_data["recv_rows"].toIntVector();
  // An output without a gradient arrives as zeros (autograd materialises it), so
  // the exchange always has the shape the peers expect.
  const torch::Tensor grad = grad_outputs[0].contiguous();
  TraceScope range("all_to_all");
  return {holder->group->all_to_all_v(grad, recv_rows, send_rows), torch::Tensor(), torch::Tensor(),
          torch::Tensor()};
}

torch::Tensor all_to_all_v(const torch::Tensor& send, const std::shared_ptr<Communicator>& group,
                           const std::vector<int64_t>& send_rows,
                           const std::vector<int64_t>& recv_rows) {
  return AllToAllV::apply(send, group, send_rows, recv_rows);
}

}  // namespace moelab
