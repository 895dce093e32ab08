#include "comm/communicator.h"

#include "comm/collective_checks.h"

namespace moelab {
namespace {

class FinishedCollective : public PendingCollective {
 public:
  void wait() override {}
};

}  // namespace

std::unique_ptr<PendingCollective> Communicator::start_all_reduce_sum(torch::Tensor& t) {
  all_reduce_sum(t);
  return std::make_unique<FinishedCollective>();
}

torch::Tensor Communicator::reduce_scatter_sum(const torch::Tensor& t) {
  const int64_t rows = reduce_scatter_rows("reduce_scatter_sum", rank(), size(), t);
  torch::Tensor sum = t.clone();
  all_reduce_sum(sum);
  return sum.narrow(0, rank() * rows, rows).clone();
}

std::unique_ptr<PendingCollective> Communicator::start_reduce_scatter_sum(torch::Tensor& t) {
  const torch::Tensor block = reduce_scatter_sum(t);
  t.narrow(0, 0, block.size(0)).copy_(block);
  return std::make_unique<FinishedCollective>();
}

torch::Tensor Communicator::gather(const torch::Tensor& t, int root) {
  check_root("gather", rank(), size(), root);
  torch::Tensor all = all_gather(t);
  return rank() == root ? all : torch::Tensor();
}

}  // namespace moelab
