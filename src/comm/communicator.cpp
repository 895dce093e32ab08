#include "comm/communicator.h"

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

}  // namespace moelab
