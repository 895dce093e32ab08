#include "data/rank_group.h"

#include <climits>

#include "util/error.h"

namespace moelab {

RankGroup::RankGroup(MPI_Comm comm) {
  int initialised = 0;
  MPI_Initialized(&initialised);
  int finalised = 0;
  MPI_Finalized(&finalised);
  active_ = initialised && !finalised;
  if (!active_) return;
  comm_ = comm;
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
}

void RankGroup::barrier() const {
  if (active_) MPI_Barrier(comm_);
}

void RankGroup::broadcast(std::string* bytes) const {
  if (!active_ || size_ == 1) return;
  int64_t length = static_cast<int64_t>(bytes->size());
  MPI_Bcast(&length, 1, MPI_INT64_T, 0, comm_);
  bytes->resize(length);
  if (length > INT_MAX) throw InputError("broadcast of more than 2 GiB is not supported");
  MPI_Bcast(bytes->data(), static_cast<int>(length), MPI_CHAR, 0, comm_);
}

void RankGroup::throw_if_any_failed(const std::optional<std::string>& local_error) const {
  if (!active_ || size_ == 1) {
    if (local_error) throw InputError(*local_error);
    return;
  }
  int candidate = local_error ? rank_ : size_;
  int first_failed = size_;
  MPI_Allreduce(&candidate, &first_failed, 1, MPI_INT, MPI_MIN, comm_);
  if (first_failed == size_) return;
  std::string message = local_error ? *local_error : std::string();
  int64_t length = static_cast<int64_t>(message.size());
  MPI_Bcast(&length, 1, MPI_INT64_T, first_failed, comm_);
  message.resize(length);
  MPI_Bcast(message.data(), static_cast<int>(length), MPI_CHAR, first_failed, comm_);
  throw InputError(message);
}

std::vector<int64_t> RankGroup::gather_counts(int64_t count) const {
  if (!active_ || size_ == 1) return {count};
  std::vector<int64_t> counts(is_root() ? size_ : 0);
  MPI_Gather(&count, 1, MPI_INT64_T, counts.data(), 1, MPI_INT64_T, 0, comm_);
  return counts;
}

template <typename T>
std::vector<T> RankGroup::gather_values(const std::vector<T>& values, MPI_Datatype type) const {
  if (!active_ || size_ == 1) return values;
  const std::vector<int64_t> counts = gather_counts(static_cast<int64_t>(values.size()));
  std::vector<int> recv_counts;
  std::vector<int> displacements;
  std::vector<T> gathered;
  if (is_root()) {
    int64_t total = 0;
    for (int64_t count : counts) {
      displacements.push_back(static_cast<int>(total));
      recv_counts.push_back(static_cast<int>(count));
      total += count;
    }
    // MPI counts are int; prep exchanges in blocks far below this.
    if (total > INT_MAX) throw InputError("prep exchange block too large; lower the block size");
    gathered.resize(total);
  }
  MPI_Gatherv(values.data(), static_cast<int>(values.size()), type, gathered.data(),
              recv_counts.data(), displacements.data(), type, 0, comm_);
  return gathered;
}

std::vector<int64_t> RankGroup::gather_to_root(const std::vector<int64_t>& values) const {
  return gather_values(values, MPI_INT64_T);
}

std::vector<uint32_t> RankGroup::gather_to_root(const std::vector<uint32_t>& values) const {
  return gather_values(values, MPI_UINT32_T);
}

}  // namespace moelab
