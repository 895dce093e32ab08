// A world of one without MPI (unit tests and tools that never call MpiSession):
// every collective is the identity, with the same argument checks as the real ones.
#pragma once

#include "comm/communicator.h"

namespace moelab {

class LocalCommunicator : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void all_reduce_sum(at::Tensor&) override {}
  void all_reduce_max(at::Tensor&) override {}
  at::Tensor all_gather(const at::Tensor& t) override;
  at::Tensor all_to_all_v(const at::Tensor& send, const std::vector<int64_t>& send_rows,
                          const std::vector<int64_t>& recv_rows) override;
  void broadcast(at::Tensor& t, int root) override;
  void barrier() override {}
  std::string backend() const override { return "local"; }
};

}  // namespace moelab
