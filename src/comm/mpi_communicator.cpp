#include "comm/mpi_communicator.h"

#include <climits>
#include <stdexcept>

#include "comm/collective_checks.h"
#include "comm/watchdog.h"

namespace moelab {
namespace {

// A contiguous CPU tensor holding t's values: t itself when possible, else a
// copy (pinned when t lives on the GPU, so the device-to-host copy is fast).
torch::Tensor host_contiguous(const torch::Tensor& t) {
  if (!t.is_cuda()) return t.contiguous();
  torch::Tensor host = torch::empty(t.sizes(), t.options().device(torch::kCPU).pinned_memory(true));
  host.copy_(t);
  return host;
}

// A CPU buffer to receive into, pinned when the result goes back to the GPU.
torch::Tensor host_empty(const std::vector<int64_t>& shape, const torch::Tensor& like) {
  return torch::empty(shape, like.options().device(torch::kCPU).pinned_memory(like.is_cuda()));
}

torch::Tensor to_device_of(const torch::Tensor& host, const torch::Tensor& like) {
  return like.is_cuda() ? host.to(like.device()) : host;
}

// Writes `work` back into `t` unless they already share storage.
void copy_back(torch::Tensor& t, const torch::Tensor& work) {
  if (!work.is_same(t)) t.copy_(work);
}

// What the non-blocking collectives take as they are: MPI reduces these in place
// of the caller's memory, with no staging copy to write back at wait().
bool startable(const torch::Tensor& t) {
  const auto type = t.scalar_type();
  return !t.is_cuda() && t.is_contiguous() && (type == torch::kFloat || type == torch::kDouble);
}

// MPI has no bf16/fp16 reductions: they are reduced as fp32, which sums them
// without extra rounding steps. Returns the (possibly converted) values to reduce.
torch::Tensor reducible(const torch::Tensor& t) {
  torch::Tensor work = host_contiguous(t);
  const auto type = work.scalar_type();
  return type == torch::kBFloat16 || type == torch::kHalf ? work.to(torch::kFloat) : work;
}

}  // namespace

MpiCommunicator::MpiCommunicator(MPI_Comm comm) : comm_(comm) {
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
}

MpiCommunicator::~MpiCommunicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && comm_ != MPI_COMM_WORLD && comm_ != MPI_COMM_SELF) MPI_Comm_free(&comm_);
}

void MpiCommunicator::check(int code, const char* op) const {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  throw std::runtime_error(comm_error(op, rank_, std::string(text, length)));
}

int MpiCommunicator::checked_count(int64_t count, const char* op) const {
  // MPI counts are int; larger messages would silently wrap.
  if (count > INT_MAX) {
    throw std::runtime_error(comm_error(
        op, rank_, "count " + std::to_string(count) + " exceeds the MPI limit of INT_MAX"));
  }
  return static_cast<int>(count);
}

MPI_Datatype MpiCommunicator::datatype(const torch::Tensor& work, const char* op) const {
  switch (work.scalar_type()) {
    case torch::kFloat:
      return MPI_FLOAT;
    case torch::kDouble:
      return MPI_DOUBLE;
    case torch::kLong:
      return MPI_INT64_T;
    case torch::kInt:
      return MPI_INT32_T;
    case torch::kShort:
      return MPI_INT16_T;
    case torch::kChar:
      return MPI_INT8_T;
    case torch::kByte:
      return MPI_UINT8_T;
    default:
      throw std::invalid_argument(comm_error(
          op, rank_, std::string("unsupported dtype ") + c10::toString(work.scalar_type())));
  }
}

void MpiCommunicator::all_reduce(torch::Tensor& t, MPI_Op op, const char* name) {
  torch::Tensor work = reducible(t);
  const MPI_Datatype type = datatype(work, name);
  CollectiveScope scope(name);
  check(MPI_Allreduce(MPI_IN_PLACE, work.data_ptr(), checked_count(work.numel(), name), type, op,
                      comm_),
        name);
  copy_back(t, work);
}

void MpiCommunicator::all_reduce_sum(torch::Tensor& t) {
  all_reduce(t, MPI_SUM, "all_reduce_sum");
}

// A started MPI_Iallreduce; wait() runs under the collective watchdog like any
// blocking collective.
class MpiPendingCollective : public PendingCollective {
 public:
  MpiPendingCollective(const MpiCommunicator& comm, MPI_Request request, const char* op)
      : comm_(comm), request_(request), op_(op) {}
  ~MpiPendingCollective() override {
    if (request_ != MPI_REQUEST_NULL) MPI_Wait(&request_, MPI_STATUS_IGNORE);
  }
  void progress() override {
    int done = 0;
    if (request_ != MPI_REQUEST_NULL)
      comm_.check(MPI_Test(&request_, &done, MPI_STATUS_IGNORE), op_);
  }
  void wait() override {
    CollectiveScope scope(op_);
    comm_.check(MPI_Wait(&request_, MPI_STATUS_IGNORE), op_);
  }

 private:
  const MpiCommunicator& comm_;
  MPI_Request request_;
  const char* op_;  // what it started, overlapped
};

std::unique_ptr<PendingCollective> MpiCommunicator::start_all_reduce_sum(torch::Tensor& t) {
  if (!startable(t)) return Communicator::start_all_reduce_sum(t);
  const char* op = "all_reduce_sum (start)";
  MPI_Request request = MPI_REQUEST_NULL;
  check(MPI_Iallreduce(MPI_IN_PLACE, t.data_ptr(), checked_count(t.numel(), op), datatype(t, op),
                       MPI_SUM, comm_, &request),
        op);
  return std::make_unique<MpiPendingCollective>(*this, request, "all_reduce_sum (overlapped)");
}

torch::Tensor MpiCommunicator::reduce_scatter_sum(const torch::Tensor& t) {
  const char* op = "reduce_scatter_sum";
  const int64_t rows = reduce_scatter_rows(op, rank_, size_, t);
  torch::Tensor work = reducible(t);
  torch::Tensor out = host_empty(with_rows(work, rows), work);
  const MPI_Datatype type = datatype(work, op);
  CollectiveScope scope(op);
  check(MPI_Reduce_scatter_block(work.data_ptr(), out.data_ptr(), checked_count(out.numel(), op),
                                 type, MPI_SUM, comm_),
        op);
  return to_device_of(out, t).to(t.scalar_type());
}

std::unique_ptr<PendingCollective> MpiCommunicator::start_reduce_scatter_sum(torch::Tensor& t) {
  const char* op = "reduce_scatter_sum (start)";
  reduce_scatter_rows(op, rank_, size_, t);
  if (!startable(t)) return Communicator::start_reduce_scatter_sum(t);
  // In place, MPI reads every block from t and writes the result to its first.
  MPI_Request request = MPI_REQUEST_NULL;
  check(MPI_Ireduce_scatter_block(MPI_IN_PLACE, t.data_ptr(), checked_count(t.numel() / size_, op),
                                  datatype(t, op), MPI_SUM, comm_, &request),
        op);
  return std::make_unique<MpiPendingCollective>(*this, request, "reduce_scatter_sum (overlapped)");
}

void MpiCommunicator::all_reduce_max(torch::Tensor& t) {
  all_reduce(t, MPI_MAX, "all_reduce_max");
}

torch::Tensor MpiCommunicator::all_gather(const torch::Tensor& t) {
  const char* op = "all_gather";
  if (t.dim() < 1) throw std::invalid_argument(comm_error(op, rank_, "tensor must have dim 0"));
  torch::Tensor in = host_contiguous(t);
  torch::Tensor out = host_empty(with_rows(t, t.size(0) * size_), t);
  const int bytes = checked_count(in.nbytes(), op);
  CollectiveScope scope(op);
  check(MPI_Allgather(in.data_ptr(), bytes, MPI_BYTE, out.data_ptr(), bytes, MPI_BYTE, comm_), op);
  return to_device_of(out, t);
}

torch::Tensor MpiCommunicator::gather(const torch::Tensor& t, int root) {
  const char* op = "gather";
  check_root(op, rank_, size_, root);
  if (t.dim() < 1) throw std::invalid_argument(comm_error(op, rank_, "tensor must have dim 0"));
  torch::Tensor in = host_contiguous(t);
  torch::Tensor out;
  if (rank_ == root) out = host_empty(with_rows(t, t.size(0) * size_), t);
  const int bytes = checked_count(in.nbytes(), op);
  CollectiveScope scope(op);
  check(MPI_Gather(in.data_ptr(), bytes, MPI_BYTE, rank_ == root ? out.data_ptr() : nullptr, bytes,
                   MPI_BYTE, root, comm_),
        op);
  return rank_ == root ? to_device_of(out, t) : torch::Tensor();
}

torch::Tensor MpiCommunicator::all_to_all_v(const torch::Tensor& send,
                                            const std::vector<int64_t>& send_rows,
                                            const std::vector<int64_t>& recv_rows) {
  const char* op = "all_to_all_v";
  const int64_t total = check_all_to_all_splits(op, rank_, size_, send, send_rows, recv_rows);
  torch::Tensor in = host_contiguous(send);
  torch::Tensor out = host_empty(with_rows(send, total), send);
  const int64_t bytes_per_row = row_bytes(send);
  if (bytes_per_row == 0) return to_device_of(out, send);

  // Counts and displacements are in rows of one derived datatype, so the INT_MAX
  // limit applies to rows rather than bytes.
  std::vector<int> send_counts(size_), send_displs(size_), recv_counts(size_), recv_displs(size_);
  int64_t send_offset = 0, recv_offset = 0;
  for (int p = 0; p < size_; ++p) {
    send_counts[p] = checked_count(send_rows[p], op);
    recv_counts[p] = checked_count(recv_rows[p], op);
    send_displs[p] = checked_count(send_offset, op);
    recv_displs[p] = checked_count(recv_offset, op);
    send_offset += send_rows[p];
    recv_offset += recv_rows[p];
  }
  MPI_Datatype row = MPI_DATATYPE_NULL;
  check(MPI_Type_contiguous(checked_count(bytes_per_row, op), MPI_BYTE, &row), op);
  MPI_Type_commit(&row);
  CollectiveScope scope(op);
  const int code =
      MPI_Alltoallv(in.data_ptr(), send_counts.data(), send_displs.data(), row, out.data_ptr(),
                    recv_counts.data(), recv_displs.data(), row, comm_);
  MPI_Type_free(&row);
  check(code, op);
  return to_device_of(out, send);
}

void MpiCommunicator::broadcast(torch::Tensor& t, int root) {
  const char* op = "broadcast";
  check_root(op, rank_, size_, root);
  torch::Tensor work = host_contiguous(t);
  CollectiveScope scope(op);
  check(MPI_Bcast(work.data_ptr(), checked_count(work.nbytes(), op), MPI_BYTE, root, comm_), op);
  copy_back(t, work);
}

void MpiCommunicator::barrier() {
  CollectiveScope scope("barrier");
  check(MPI_Barrier(comm_), "barrier");
}

}  // namespace moelab
