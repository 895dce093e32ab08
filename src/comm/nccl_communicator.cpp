#include "comm/nccl_communicator.h"

#include <c10/cuda/CUDAStream.h>

#include <stdexcept>

#include "comm/collective_checks.h"

namespace moelab {
namespace {

ncclDataType_t nccl_type(torch::ScalarType type) {
  switch (type) {
    case torch::kFloat:
      return ncclFloat32;
    case torch::kDouble:
      return ncclFloat64;
    case torch::kHalf:
      return ncclFloat16;
    case torch::kBFloat16:
      return ncclBfloat16;
    case torch::kLong:
      return ncclInt64;
    case torch::kInt:
      return ncclInt32;
    case torch::kChar:
      return ncclInt8;
    case torch::kByte:
      return ncclUint8;
    default:
      throw std::invalid_argument(std::string("NCCL: unsupported dtype ") + c10::toString(type));
  }
}

char* bytes_of(const torch::Tensor& t) {
  return static_cast<char*>(t.data_ptr());
}

// LibTorch's current stream on the tensor's device: where its producers ran.
cudaStream_t stream_of(const torch::Tensor& t) {
  return c10::cuda::getCurrentCUDAStream(t.device().index()).stream();
}

}  // namespace

NcclCommunicator::NcclCommunicator(MPI_Comm comm) : comm_(comm) {
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
  ncclUniqueId id;
  if (rank_ == 0) check(ncclGetUniqueId(&id), "ncclGetUniqueId");
  if (MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, comm_) != MPI_SUCCESS) {
    throw std::runtime_error(comm_error("MPI_Bcast of the NCCL unique id", rank_, "failed"));
  }
  check(ncclCommInitRank(&nccl_, size_, id, rank_), "ncclCommInitRank");
  watch_async_collectives(this);
}

NcclCommunicator::~NcclCommunicator() {
  unwatch_async_collectives(this);
  for (const Pending& p : pending_) cudaEventDestroy(p.done);
  if (nccl_ != nullptr) ncclCommDestroy(nccl_);
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Comm_free(&comm_);
}

void NcclCommunicator::check(ncclResult_t result, const char* op) const {
  if (result == ncclSuccess) return;
  std::string what = ncclGetErrorString(result);
  if (nccl_ != nullptr) what += std::string(" (") + ncclGetLastError(nccl_) + ")";
  throw std::runtime_error(comm_error(op, rank_, what));
}

void NcclCommunicator::enqueued(const char* op, cudaStream_t stream) {
  cudaEvent_t done = nullptr;
  if (cudaEventCreateWithFlags(&done, cudaEventDisableTiming) != cudaSuccess ||
      cudaEventRecord(done, stream) != cudaSuccess) {
    throw std::runtime_error(comm_error(op, rank_, "cannot record a CUDA event after it"));
  }
  std::lock_guard<std::mutex> lock(pending_mutex_);
  forget_completed();  // also without a watchdog to ask, the list stays short
  pending_.push_back({op, watchdog_clock_ms(), done});
}

void NcclCommunicator::forget_completed() {
  while (!pending_.empty() && cudaEventQuery(pending_.front().done) == cudaSuccess) {
    cudaEventDestroy(pending_.front().done);
    pending_.pop_front();
  }
}

AsyncCollectives::Oldest NcclCommunicator::oldest_unfinished() {
  std::lock_guard<std::mutex> lock(pending_mutex_);
  forget_completed();
  if (pending_.empty()) return {};
  return {pending_.front().op, pending_.front().enqueued_ms};
}

std::string NcclCommunicator::async_error() {
  ncclResult_t result = ncclSuccess;
  if (ncclCommGetAsyncError(nccl_, &result) != ncclSuccess) return "ncclCommGetAsyncError failed";
  if (result == ncclSuccess || result == ncclInProgress) return "";
  return ncclGetErrorString(result);
}

void NcclCommunicator::abort() {
  ncclCommAbort(nccl_);
}

void NcclCommunicator::require_cuda(const torch::Tensor& t, const char* op) const {
  if (!t.is_cuda()) {
    throw std::invalid_argument(comm_error(op, rank_, "the NCCL backend needs CUDA tensors"));
  }
}

void NcclCommunicator::all_reduce(torch::Tensor& t, ncclRedOp_t op, const char* name) {
  require_cuda(t, name);
  torch::Tensor work = t.contiguous();
  check(ncclAllReduce(work.data_ptr(), work.data_ptr(), work.numel(), nccl_type(work.scalar_type()),
                      op, nccl_, stream_of(work)),
        name);
  enqueued(name, stream_of(work));
  if (!work.is_same(t)) t.copy_(work);
}

void NcclCommunicator::all_reduce_sum(torch::Tensor& t) {
  all_reduce(t, ncclSum, "all_reduce_sum");
}

void NcclCommunicator::all_reduce_max(torch::Tensor& t) {
  all_reduce(t, ncclMax, "all_reduce_max");
}

torch::Tensor NcclCommunicator::reduce_scatter_sum(const torch::Tensor& t) {
  const char* op = "reduce_scatter_sum";
  require_cuda(t, op);
  const int64_t rows = reduce_scatter_rows(op, rank_, size_, t);
  torch::Tensor in = t.contiguous();
  torch::Tensor out = torch::empty(with_rows(t, rows), t.options());
  check(ncclReduceScatter(in.data_ptr(), out.data_ptr(), out.numel(), nccl_type(in.scalar_type()),
                          ncclSum, nccl_, stream_of(in)),
        op);
  enqueued(op, stream_of(in));
  return out;
}

torch::Tensor NcclCommunicator::all_gather(const torch::Tensor& t) {
  const char* op = "all_gather";
  require_cuda(t, op);
  if (t.dim() < 1) throw std::invalid_argument(comm_error(op, rank_, "tensor must have dim 0"));
  torch::Tensor in = t.contiguous();
  torch::Tensor out = torch::empty(with_rows(t, t.size(0) * size_), t.options());
  check(ncclAllGather(in.data_ptr(), out.data_ptr(), in.nbytes(), ncclUint8, nccl_, stream_of(in)),
        op);
  enqueued(op, stream_of(in));
  return out;
}

torch::Tensor NcclCommunicator::gather(const torch::Tensor& t, int root) {
  const char* op = "gather";
  require_cuda(t, op);
  check_root(op, rank_, size_, root);
  if (t.dim() < 1) throw std::invalid_argument(comm_error(op, rank_, "tensor must have dim 0"));
  torch::Tensor in = t.contiguous();
  const cudaStream_t stream = stream_of(in);
  const size_t bytes = in.nbytes();
  torch::Tensor out;
  // NCCL has no gather: every rank sends to the root, which receives from each.
  check(ncclGroupStart(), op);
  if (rank_ == root) {
    out = torch::empty(with_rows(t, t.size(0) * size_), t.options());
    for (int p = 0; p < size_; ++p) {
      check(ncclRecv(bytes_of(out) + p * bytes, bytes, ncclUint8, p, nccl_, stream), op);
    }
  }
  check(ncclSend(in.data_ptr(), bytes, ncclUint8, root, nccl_, stream), op);
  check(ncclGroupEnd(), op);
  enqueued(op, stream);
  return out;
}

torch::Tensor NcclCommunicator::all_to_all_v(const torch::Tensor& send,
                                             const std::vector<int64_t>& send_rows,
                                             const std::vector<int64_t>& recv_rows) {
  const char* op = "all_to_all_v";
  require_cuda(send, op);
  const int64_t total = check_all_to_all_splits(op, rank_, size_, send, send_rows, recv_rows);
  torch::Tensor in = send.contiguous();
  torch::Tensor out = torch::empty(with_rows(send, total), send.options());
  const int64_t bytes_per_row = row_bytes(send);
  if (bytes_per_row == 0) return out;
  const cudaStream_t stream = stream_of(in);
  // Point-to-point pairs inside one group run as a single fused exchange.
  check(ncclGroupStart(), op);
  int64_t send_offset = 0, recv_offset = 0;
  for (int p = 0; p < size_; ++p) {
    if (send_rows[p] > 0) {
      check(ncclSend(bytes_of(in) + send_offset * bytes_per_row, send_rows[p] * bytes_per_row,
                     ncclUint8, p, nccl_, stream),
            op);
    }
    if (recv_rows[p] > 0) {
      check(ncclRecv(bytes_of(out) + recv_offset * bytes_per_row, recv_rows[p] * bytes_per_row,
                     ncclUint8, p, nccl_, stream),
            op);
    }
    send_offset += send_rows[p];
    recv_offset += recv_rows[p];
  }
  check(ncclGroupEnd(), op);
  enqueued(op, stream);
  return out;
}

void NcclCommunicator::broadcast(torch::Tensor& t, int root) {
  const char* op = "broadcast";
  require_cuda(t, op);
  check_root(op, rank_, size_, root);
  torch::Tensor work = t.contiguous();
  check(ncclBroadcast(work.data_ptr(), work.data_ptr(), work.nbytes(), ncclUint8, root, nccl_,
                      stream_of(work)),
        op);
  enqueued(op, stream_of(work));
  if (!work.is_same(t)) t.copy_(work);
}

void NcclCommunicator::barrier() {
  // Waits for this rank's queued collectives, then for every other rank.
  c10::cuda::getCurrentCUDAStream().synchronize();
  if (MPI_Barrier(comm_) != MPI_SUCCESS) {
    throw std::runtime_error(comm_error("barrier", rank_, "MPI_Barrier failed"));
  }
}

}  // namespace moelab
