// The ranks that run `moelab prep` together. Without MPI (unit tests, or MPI
// never initialised) it is a group of one and makes no MPI calls.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace moelab {

class RankGroup {
 public:
  explicit RankGroup(MPI_Comm comm);

  int rank() const { return rank_; }
  int size() const { return size_; }
  bool is_root() const { return rank_ == 0; }

  void barrier() const;
  // Rank 0's `bytes` on every rank.
  void broadcast(std::string* bytes) const;
  // Collective: if any rank passes an error, every rank throws InputError with
  // the message of the lowest such rank, so no rank is left waiting.
  void throw_if_any_failed(const std::optional<std::string>& local_error) const;
  // Concatenation of every rank's `values` on rank 0 (rank order); empty elsewhere.
  std::vector<int64_t> gather_to_root(const std::vector<int64_t>& values) const;
  std::vector<uint32_t> gather_to_root(const std::vector<uint32_t>& values) const;
  // Every rank's value of `count` on rank 0 (rank order).
  std::vector<int64_t> gather_counts(int64_t count) const;

 private:
  template <typename T>
  std::vector<T> gather_values(const std::vector<T>& values, MPI_Datatype type) const;

  MPI_Comm comm_ = MPI_COMM_NULL;
  bool active_ = false;
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace moelab
