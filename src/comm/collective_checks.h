// Argument checks shared by every Communicator backend, so a wrong split fails
// the same way (and before any rank blocks in a collective) whatever the transport.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

namespace moelab {

// Checks that send_rows/recv_rows have one entry per rank, are non-negative and
// that send_rows adds up to send.size(0). Returns the number of rows to receive.
int64_t check_all_to_all_splits(const char* op, int rank, int size, const torch::Tensor& send,
                                const std::vector<int64_t>& send_rows,
                                const std::vector<int64_t>& recv_rows);

// Checks that `root` is a rank of a group of `size`.
void check_root(const char* op, int rank, int size, int root);

// Checks that `t` has a dim 0 that the group's `size` ranks split evenly, as
// reduce_scatter_sum needs. Returns the rows each rank receives.
int64_t reduce_scatter_rows(const char* op, int rank, int size, const torch::Tensor& t);

// Bytes in one dim-0 row of `t` (the product of the other dims times the item size).
int64_t row_bytes(const torch::Tensor& t);

// Shape of `t` with dim 0 replaced by `rows`.
std::vector<int64_t> with_rows(const torch::Tensor& t, int64_t rows);

// "<op> on rank <rank>: <what>", the prefix every communicator error carries.
std::string comm_error(const char* op, int rank, const std::string& what);

}  // namespace moelab
