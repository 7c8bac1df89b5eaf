#include "adamant/comm/mpi_communicator.h"

#include <climits>
#include <cstring>
#include <utility>

#include "adamant/comm/collective_checks.h"
#include "adamant/comm/mpi_check.h"

namespace adamant::comm {

namespace {

// Point-to-point messages of a communicator share one tag: MPI keeps the order of messages
// between two ranks with the same tag, which is the pairing Communicator promises.
constexpr int kPointToPointTag = 7;

// Host-side work that completes a collective once MPI is done with it.
struct AfterCompletion {
  // In-place reduce-scatter: MPI leaves the reduced block at the front of send.
  const void* move_from = nullptr;
  void* move_to = nullptr;
  std::size_t move_bytes = 0;
  // avg: the sum is divided by the group size on each rank alike.
  void* divide_data = nullptr;
  DType divide_dtype = DType::f32;
  std::size_t divide_count = 0;
  int divisor = 1;

  void run() const {
    if (move_bytes != 0) std::memcpy(move_to, move_from, move_bytes);
    if (divide_count != 0) divide_in_place(divide_data, divide_dtype, divide_count, divisor);
  }
};

// What a wait tells the watchdog: the collective and the group it waits for.
struct WatchedWait {
  CollectiveWatchdog* watchdog = nullptr;  // null: not watched
  const char* operation = "";
  const char* group = "";
};

int watched_mpi_wait(MPI_Request& request, const WatchedWait& watched) {
  const CollectiveWatch watch(watched.watchdog, watched.operation, watched.group);
  return MPI_Wait(&request, MPI_STATUS_IGNORE);
}

class MpiRequestHandle final : public CommHandle::Impl {
 public:
  MpiRequestHandle(MPI_Request request, AfterCompletion after, std::shared_ptr<const MpiReduceOps> reduce_ops,
                   std::shared_ptr<CollectiveWatchdog> watchdog, WatchedWait watched)
      : request_(request),
        after_(after),
        reduce_ops_(std::move(reduce_ops)),
        watchdog_(std::move(watchdog)),
        watched_(watched) {
    watched_.watchdog = watchdog_.get();
  }

  ~MpiRequestHandle() override {
    if (request_ == MPI_REQUEST_NULL || !mpi_is_active()) return;
    if (watched_mpi_wait(request_, watched_) != MPI_SUCCESS) return;
    try {
      after_.run();
    } catch (...) {  // dtypes were checked when the collective was issued; nothing to report here
    }
  }
  MpiRequestHandle(const MpiRequestHandle&) = delete;
  MpiRequestHandle& operator=(const MpiRequestHandle&) = delete;

  // Any stream: MPI progresses on the host, so completion always blocks the host.
  void wait(const Stream& /*stream*/) override {
    const int code = watched_mpi_wait(request_, watched_);
    request_ = MPI_REQUEST_NULL;
    check_mpi(code, "MPI_Wait");
    after_.run();
  }

 private:
  MPI_Request request_;
  AfterCompletion after_;
  std::shared_ptr<const MpiReduceOps> reduce_ops_;
  std::shared_ptr<CollectiveWatchdog> watchdog_;  // kept alive while the request is pending
  WatchedWait watched_;
};

CommHandle request_handle(MPI_Request request, const AfterCompletion& after,
                          const std::shared_ptr<const MpiReduceOps>& reduce_ops,
                          const std::shared_ptr<CollectiveWatchdog>& watchdog, const char* operation,
                          const char* group) {
  return CommHandle(
      std::make_unique<MpiRequestHandle>(request, after, reduce_ops, watchdog, WatchedWait{nullptr, operation, group}));
}

int mpi_count(std::size_t count, std::string_view operation) {
  ADAMANT_CHECK(count <= static_cast<std::size_t>(INT_MAX),
                "MPI {}: {} elements exceed MPI's int count limit {}; split the buffer into smaller pieces", operation,
                count, INT_MAX);
  return static_cast<int>(count);
}

MPI_Comm duplicate_comm(MPI_Comm comm) {
  ADAMANT_CHECK(mpi_is_active(),
                "MpiCommunicator: MPI is not initialised (or already finalised); create an "
                "adamant::comm::MpiSession at the start of main");
  MPI_Comm copy = MPI_COMM_NULL;
  check_mpi(MPI_Comm_dup(comm, &copy), "MPI_Comm_dup");
  return copy;
}

}  // namespace

MpiCommunicator::MpiCommunicator(MPI_Comm comm) : MpiCommunicator(Adopt{}, duplicate_comm(comm)) {}

MpiCommunicator::MpiCommunicator(Adopt, MPI_Comm owned) : comm_(owned) {
  try {
    check_mpi(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    check_mpi(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
    check_mpi(MPI_Comm_size(comm_, &size_), "MPI_Comm_size");
    reduce_ops_ = std::make_shared<const MpiReduceOps>();
  } catch (...) {
    release();
    throw;
  }
}

MpiCommunicator::~MpiCommunicator() { release(); }

MpiCommunicator::MpiCommunicator(MpiCommunicator&& other) noexcept
    : comm_(std::exchange(other.comm_, MPI_COMM_NULL)),
      rank_(other.rank_),
      size_(other.size_),
      reduce_ops_(std::move(other.reduce_ops_)),
      watchdog_(std::move(other.watchdog_)),
      group_name_(other.group_name_) {}

MpiCommunicator& MpiCommunicator::operator=(MpiCommunicator&& other) noexcept {
  if (this != &other) {
    release();
    comm_ = std::exchange(other.comm_, MPI_COMM_NULL);
    rank_ = other.rank_;
    size_ = other.size_;
    reduce_ops_ = std::move(other.reduce_ops_);
    watchdog_ = std::move(other.watchdog_);
    group_name_ = other.group_name_;
  }
  return *this;
}

void MpiCommunicator::release() noexcept {
  // Pending collectives on the communicator still complete (MPI_Comm_free only marks it).
  if (comm_ != MPI_COMM_NULL && mpi_is_active()) MPI_Comm_free(&comm_);
  comm_ = MPI_COMM_NULL;
}

MpiCommunicator MpiCommunicator::split(int color, int key) const {
  MPI_Comm part = MPI_COMM_NULL;
  {
    const CollectiveWatch watch(watchdog_.get(), "MPI_Comm_split", group_name_);
    check_mpi(MPI_Comm_split(comm_, color, key, &part), "MPI_Comm_split");
  }
  MpiCommunicator result(Adopt{}, part);
  result.watchdog_ = watchdog_;
  result.group_name_ = group_name_;
  return result;
}

MpiCommunicator MpiCommunicator::duplicate() const {
  MPI_Comm copy = MPI_COMM_NULL;
  {
    const CollectiveWatch watch(watchdog_.get(), "MPI_Comm_dup", group_name_);
    check_mpi(MPI_Comm_dup(comm_, &copy), "MPI_Comm_dup");
  }
  MpiCommunicator result(Adopt{}, copy);
  result.watchdog_ = watchdog_;
  result.group_name_ = group_name_;
  return result;
}

void MpiCommunicator::set_watchdog(std::shared_ptr<CollectiveWatchdog> watchdog, const char* group) {
  watchdog_ = std::move(watchdog);
  group_name_ = group;
}

CommHandle MpiCommunicator::all_reduce_async(Tensor data, ReduceOp op) {
  check_tensor_device(data, *this, "all_reduce");
  check_reduce_dtype(data.dtype, op, *this, "all_reduce");
  const int count = mpi_count(data.numel(), "all_reduce");
  if (count == 0) return CommHandle();
  AfterCompletion after;
  if (op == ReduceOp::avg) {
    after.divide_data = data.data;
    after.divide_dtype = data.dtype;
    after.divide_count = data.numel();
    after.divisor = size_;
  }
  MPI_Request request = MPI_REQUEST_NULL;
  check_mpi(MPI_Iallreduce(MPI_IN_PLACE, data.data, count, mpi_datatype(data.dtype),
                           reduce_ops_->op_for(data.dtype, op), comm_, &request),
            "MPI_Iallreduce");
  return request_handle(request, after, reduce_ops_, watchdog_, "all_reduce", group_name_);
}

CommHandle MpiCommunicator::reduce_scatter_async(Tensor send, Tensor recv, ReduceOp op) {
  const bool in_place = check_reduce_scatter_args(send, recv, *this);
  check_reduce_dtype(send.dtype, op, *this, "reduce_scatter");
  const int count = mpi_count(recv.numel(), "reduce_scatter");
  if (count == 0) return CommHandle();
  AfterCompletion after;
  if (in_place && rank_ != 0) {
    after.move_from = send.data;
    after.move_to = recv.data;
    after.move_bytes = recv.bytes();
  }
  if (op == ReduceOp::avg) {
    after.divide_data = recv.data;
    after.divide_dtype = recv.dtype;
    after.divide_count = recv.numel();
    after.divisor = size_;
  }
  // In place, MPI takes the whole input from recvbuf and writes the result to its first block.
  const void* send_buffer = in_place ? MPI_IN_PLACE : send.data;
  void* recv_buffer = in_place ? send.data : recv.data;
  MPI_Request request = MPI_REQUEST_NULL;
  check_mpi(MPI_Ireduce_scatter_block(send_buffer, recv_buffer, count, mpi_datatype(send.dtype),
                                      reduce_ops_->op_for(send.dtype, op), comm_, &request),
            "MPI_Ireduce_scatter_block");
  return request_handle(request, after, reduce_ops_, watchdog_, "reduce_scatter", group_name_);
}

CommHandle MpiCommunicator::all_gather_async(Tensor send, Tensor recv) {
  const bool in_place = check_all_gather_args(send, recv, *this);
  const int count = mpi_count(send.numel(), "all_gather");
  if (count == 0) return CommHandle();
  const MPI_Datatype datatype = mpi_datatype(send.dtype);
  MPI_Request request = MPI_REQUEST_NULL;
  if (in_place) {  // this rank's block is already in recv; MPI ignores the send count and type
    check_mpi(MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv.data, count, datatype, comm_, &request),
              "MPI_Iallgather");
  } else {
    check_mpi(MPI_Iallgather(send.data, count, datatype, recv.data, count, datatype, comm_, &request),
              "MPI_Iallgather");
  }
  return request_handle(request, AfterCompletion{}, reduce_ops_, watchdog_, "all_gather", group_name_);
}

CommHandle MpiCommunicator::send_async(Tensor data, int peer) {
  check_tensor_device(data, *this, "send");
  check_peer(peer, *this, "send");
  const int count = mpi_count(data.numel(), "send");
  if (count == 0) return CommHandle();
  MPI_Request request = MPI_REQUEST_NULL;
  check_mpi(MPI_Isend(data.data, count, mpi_datatype(data.dtype), peer, kPointToPointTag, comm_, &request),
            "MPI_Isend");
  return request_handle(request, AfterCompletion{}, reduce_ops_, watchdog_, "send", group_name_);
}

CommHandle MpiCommunicator::recv_async(Tensor data, int peer) {
  check_tensor_device(data, *this, "recv");
  check_peer(peer, *this, "recv");
  const int count = mpi_count(data.numel(), "recv");
  if (count == 0) return CommHandle();
  MPI_Request request = MPI_REQUEST_NULL;
  check_mpi(MPI_Irecv(data.data, count, mpi_datatype(data.dtype), peer, kPointToPointTag, comm_, &request),
            "MPI_Irecv");
  return request_handle(request, AfterCompletion{}, reduce_ops_, watchdog_, "recv", group_name_);
}

CommHandle MpiCommunicator::broadcast_async(Tensor data, int root) {
  check_tensor_device(data, *this, "broadcast");
  check_broadcast_root(root, *this);
  const int count = mpi_count(data.numel(), "broadcast");
  if (count == 0) return CommHandle();
  MPI_Request request = MPI_REQUEST_NULL;
  check_mpi(MPI_Ibcast(data.data, count, mpi_datatype(data.dtype), root, comm_, &request), "MPI_Ibcast");
  return request_handle(request, AfterCompletion{}, reduce_ops_, watchdog_, "broadcast", group_name_);
}

void MpiCommunicator::barrier() {
  const CollectiveWatch watch(watchdog_.get(), "barrier", group_name_);
  check_mpi(MPI_Barrier(comm_), "MPI_Barrier");
}

}  // namespace adamant::comm
