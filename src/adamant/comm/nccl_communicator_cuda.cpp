#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "adamant/comm/collective_checks.h"
#include "adamant/comm/mpi_check.h"
#include "adamant/comm/nccl_communicator.h"
#include "adamant/core/cuda_check.h"
#include "adamant/core/error.h"

namespace adamant::comm {

namespace {

// Makes `device` current for one call and restores the caller's device after.
class CurrentDevice {
 public:
  explicit CurrentDevice(int device) : device_(device) {
    ADAMANT_CUDA_CHECK(cudaGetDevice(&previous_));
    if (previous_ != device_) ADAMANT_CUDA_CHECK(cudaSetDevice(device_));
  }
  ~CurrentDevice() {
    if (previous_ != device_) cudaSetDevice(previous_);
  }
  CurrentDevice(const CurrentDevice&) = delete;
  CurrentDevice& operator=(const CurrentDevice&) = delete;

 private:
  int device_;
  int previous_ = 0;
};

ncclDataType_t nccl_datatype(DType dtype, std::string_view operation) {
  switch (dtype) {
    case DType::f32:
      return ncclFloat32;
    case DType::f64:
      return ncclFloat64;
    case DType::bf16:
      return ncclBfloat16;
    case DType::f16:
      return ncclFloat16;
    case DType::i32:
      return ncclInt32;
    case DType::i64:
      return ncclInt64;
    case DType::u8:
      return ncclUint8;
    case DType::u16:
      break;
  }
  fail("NCCL {}: {} tensors are not supported by NCCL; use a 32-bit integer or 16-bit float tensor", operation,
       dtype_name(dtype));
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
      return ncclSum;
    case ReduceOp::avg:
      return ncclAvg;
    case ReduceOp::max:
      return ncclMax;
  }
  return ncclSum;
}

cudaStream_t cuda_stream(const Stream& stream) { return static_cast<cudaStream_t>(stream.handle()); }

// Every rank checks its GPU before any rank blocks in NCCL's bootstrap, and all
// fail together if one cannot proceed (a rank alone failing would hang the rest).
int agreed_rank(const MpiCommunicator& bootstrap, Device device) {
  std::string problem;
  if (!device.is_cuda()) {
    problem = "NCCL communicator needs a CUDA device, got " + device.str();
  } else {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
      cudaGetLastError();
      count = 0;
    }
    if (device.index < 0 || device.index >= count) {
      problem = "NCCL communicator for " + device.str() + ": this process sees " + std::to_string(count) +
                " GPU(s); pick the GPU by local rank (MpiSession::local_rank()) and check CUDA_VISIBLE_DEVICES";
    } else if (cudaSetDevice(device.index) != cudaSuccess) {
      cudaGetLastError();
      problem = "NCCL communicator: cannot use " + device.str();
    }
  }
  int ok = problem.empty() ? 1 : 0;
  int all_ok = 0;
  check_mpi(MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, bootstrap.mpi_comm()), "MPI_Allreduce (NCCL setup)");
  if (!problem.empty()) fail("{}", problem);
  ADAMANT_CHECK(all_ok == 1, "NCCL communicator: another rank of the group could not set up its GPU; see its error");
  return bootstrap.rank();
}

}  // namespace

NcclCommunicator::NcclCommunicator(const MpiCommunicator& bootstrap, Device device)
    : rank_(agreed_rank(bootstrap, device)),
      size_(bootstrap.size()),
      comm_stream_(device),
      barrier_scratch_(sizeof(int), device),
      watchdog_(bootstrap.watchdog()),
      group_name_(bootstrap.group_name()) {
  // NVLink SHARP multicast can take a shared host's GPUs out of service; it stays
  // off unless the user explicitly asked for it.
  setenv("NCCL_NVLS_ENABLE", "0", /*overwrite=*/0);
  // Rank 0 sends whether it got an id too, so that its failure fails every rank.
  struct IdMessage {
    int ok = 0;
    ncclUniqueId id{};
  } message;
  ncclResult_t id_result = ncclSuccess;
  if (rank_ == 0) {
    id_result = ncclGetUniqueId(&message.id);
    message.ok = id_result == ncclSuccess ? 1 : 0;
  }
  check_mpi(MPI_Bcast(&message, sizeof(message), MPI_BYTE, 0, bootstrap.mpi_comm()), "MPI_Bcast (NCCL unique id)");
  if (rank_ == 0) check(id_result, "ncclGetUniqueId");
  ADAMANT_CHECK(message.ok == 1, "NCCL communicator: rank 0 of the group could not create the NCCL unique id");
  const CurrentDevice current(device.index);
  const CollectiveWatch watch(watchdog_.get(), "ncclCommInitRank", group_name_);
  check(ncclCommInitRank(&comm_, size_, message.id, rank_), "ncclCommInitRank");
}

NcclCommunicator::~NcclCommunicator() {
  if (comm_ == nullptr) return;
  if (cudaSetDevice(device().index) == cudaSuccess) cudaStreamSynchronize(cuda_stream(comm_stream_.stream()));
  ncclCommDestroy(comm_);
}

void NcclCommunicator::check(ncclResult_t result, const char* operation) const {
  if (result == ncclSuccess) return;
  const char* detail = comm_ != nullptr ? ncclGetLastError(comm_) : ncclGetLastError(nullptr);
  fail("{} on {} (rank {} of {}) failed: {}{}{}", operation, device().str(), rank_, size_, ncclGetErrorString(result),
       detail != nullptr && detail[0] != '\0' ? ": " : "", detail != nullptr ? detail : "");
}

CommHandle NcclCommunicator::all_reduce_async(Tensor data, ReduceOp op) {
  check_tensor_device(data, *this, "all_reduce");
  check_reduce_dtype(data.dtype, op, *this, "all_reduce");
  const ncclDataType_t datatype = nccl_datatype(data.dtype, "all_reduce");
  const CurrentDevice current(device().index);
  if (data.numel() != 0) {
    check(ncclAllReduce(data.data, data.data, data.numel(), datatype, nccl_op(op), comm_,
                        cuda_stream(comm_stream_.stream())),
          "ncclAllReduce");
  }
  return comm_stream_.completion_handle();
}

CommHandle NcclCommunicator::reduce_scatter_async(Tensor send, Tensor recv, ReduceOp op) {
  check_reduce_scatter_args(send, recv, *this);  // NCCL itself handles recv == send + rank * n
  check_reduce_dtype(send.dtype, op, *this, "reduce_scatter");
  const ncclDataType_t datatype = nccl_datatype(send.dtype, "reduce_scatter");
  const CurrentDevice current(device().index);
  if (recv.numel() != 0) {
    check(ncclReduceScatter(send.data, recv.data, recv.numel(), datatype, nccl_op(op), comm_,
                            cuda_stream(comm_stream_.stream())),
          "ncclReduceScatter");
  }
  return comm_stream_.completion_handle();
}

CommHandle NcclCommunicator::all_gather_async(Tensor send, Tensor recv) {
  check_all_gather_args(send, recv, *this);  // NCCL itself handles send == recv + rank * n
  const ncclDataType_t datatype = nccl_datatype(send.dtype, "all_gather");
  const CurrentDevice current(device().index);
  if (send.numel() != 0) {
    check(ncclAllGather(send.data, recv.data, send.numel(), datatype, comm_, cuda_stream(comm_stream_.stream())),
          "ncclAllGather");
  }
  return comm_stream_.completion_handle();
}

CommHandle NcclCommunicator::send_async(Tensor data, int peer) {
  check_tensor_device(data, *this, "send");
  check_peer(peer, *this, "send");
  const ncclDataType_t datatype = nccl_datatype(data.dtype, "send");
  const CurrentDevice current(device().index);
  if (data.numel() != 0) {
    check(ncclSend(data.data, data.numel(), datatype, peer, comm_, cuda_stream(comm_stream_.stream())), "ncclSend");
  }
  return comm_stream_.completion_handle();
}

CommHandle NcclCommunicator::recv_async(Tensor data, int peer) {
  check_tensor_device(data, *this, "recv");
  check_peer(peer, *this, "recv");
  const ncclDataType_t datatype = nccl_datatype(data.dtype, "recv");
  const CurrentDevice current(device().index);
  if (data.numel() != 0) {
    check(ncclRecv(data.data, data.numel(), datatype, peer, comm_, cuda_stream(comm_stream_.stream())), "ncclRecv");
  }
  return comm_stream_.completion_handle();
}

CommHandle NcclCommunicator::broadcast_async(Tensor data, int root) {
  check_tensor_device(data, *this, "broadcast");
  check_broadcast_root(root, *this);
  const ncclDataType_t datatype = nccl_datatype(data.dtype, "broadcast");
  const CurrentDevice current(device().index);
  if (data.numel() != 0) {
    check(ncclBroadcast(data.data, data.data, data.numel(), datatype, root, comm_, cuda_stream(comm_stream_.stream())),
          "ncclBroadcast");
  }
  return comm_stream_.completion_handle();
}

void NcclCommunicator::barrier() {
  const CurrentDevice current(device().index);
  check(ncclAllReduce(barrier_scratch_.data(), barrier_scratch_.data(), 1, ncclInt32, ncclSum, comm_,
                      cuda_stream(comm_stream_.stream())),
        "ncclAllReduce (barrier)");
  synchronize_watched("barrier");
}

void NcclCommunicator::synchronize_watched(const char* operation) {
  const CollectiveWatch watch(watchdog_.get(), operation, group_name_);
  const cudaStream_t stream = cuda_stream(comm_stream_.stream());
  for (;;) {
    const cudaError_t state = cudaStreamQuery(stream);
    if (state == cudaSuccess) return;
    if (state != cudaErrorNotReady) ADAMANT_CUDA_CHECK(state);
    ncclResult_t async_error = ncclSuccess;
    check(ncclCommGetAsyncError(comm_, &async_error), "ncclCommGetAsyncError");
    if (async_error != ncclSuccess && async_error != ncclInProgress) {
      const std::string detail = ncclGetErrorString(async_error);
      ncclCommAbort(comm_);  // ends the collectives stuck on the GPU, so the stream can drain
      comm_ = nullptr;
      fail(
          "NCCL {} over the {} group failed on {} (rank {} of {} in the group): {}; another rank has died or "
          "cannot be reached",
          operation, group_name_, device().str(), rank_, size_, detail);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

std::unique_ptr<Communicator> make_nccl_communicator(const MpiCommunicator& bootstrap, Device device) {
  return std::make_unique<NcclCommunicator>(bootstrap, device);
}

}  // namespace adamant::comm
