#include "comm/collective_checks.h"

#include <numeric>
#include <stdexcept>

namespace moelab {

std::string comm_error(const char* op, int rank, const std::string& what) {
  return std::string(op) + " on rank " + std::to_string(rank) + ": " + what;
}

int64_t check_all_to_all_splits(const char* op, int rank, int size, const torch::Tensor& send,
                                const std::vector<int64_t>& send_rows,
                                const std::vector<int64_t>& recv_rows) {
  if (send.dim() < 1) throw std::invalid_argument(comm_error(op, rank, "send must have dim 0"));
  if (static_cast<int>(send_rows.size()) != size || static_cast<int>(recv_rows.size()) != size) {
    throw std::invalid_argument(comm_error(
        op, rank,
        "expected " + std::to_string(size) + " send and recv splits, got " +
            std::to_string(send_rows.size()) + " and " + std::to_string(recv_rows.size())));
  }
  for (int p = 0; p < size; ++p) {
    if (send_rows[p] < 0 || recv_rows[p] < 0) {
      throw std::invalid_argument(
          comm_error(op, rank, "negative split for peer " + std::to_string(p)));
    }
  }
  const int64_t sent = std::accumulate(send_rows.begin(), send_rows.end(), int64_t{0});
  if (sent != send.size(0)) {
    throw std::invalid_argument(comm_error(op, rank,
                                           "send splits add up to " + std::to_string(sent) +
                                               " rows but the tensor has " +
                                               std::to_string(send.size(0))));
  }
  return std::accumulate(recv_rows.begin(), recv_rows.end(), int64_t{0});
}

void check_root(const char* op, int rank, int size, int root) {
  if (root < 0 || root >= size) {
    throw std::invalid_argument(comm_error(
        op, rank,
        "root " + std::to_string(root) + " is outside the group of " + std::to_string(size)));
  }
}

int64_t reduce_scatter_rows(const char* op, int rank, int size, const torch::Tensor& t) {
  if (t.dim() < 1 || t.size(0) % size != 0) {
    throw std::invalid_argument(comm_error(op, rank,
                                           "tensor of shape " + c10::str(t.sizes()) +
                                               " does not split into " + std::to_string(size) +
                                               " equal blocks of dim 0"));
  }
  return t.size(0) / size;
}

int64_t row_bytes(const torch::Tensor& t) {
  int64_t elements = 1;
  for (int64_t i = 1; i < t.dim(); ++i) elements *= t.size(i);
  return elements * static_cast<int64_t>(t.element_size());
}

std::vector<int64_t> with_rows(const torch::Tensor& t, int64_t rows) {
  std::vector<int64_t> shape = t.sizes().vec();
  shape[0] = rows;
  return shape;
}

}  // namespace moelab
