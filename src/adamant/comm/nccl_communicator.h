#pragma once
// Collectives over NCCL on GPU memory, one GPU per rank, bootstrapped over an
// MPI group. The class exists only in CUDA builds; make_nccl_communicator
// exists in every build and explains what is missing in a CPU-only one.
#include <memory>

#include "adamant/comm/communicator.h"
#include "adamant/comm/mpi_communicator.h"

#ifdef ADAMANT_HAVE_CUDA
#include <nccl.h>

#include "adamant/comm/comm_stream.h"
#include "adamant/core/buffer.h"
#endif

namespace adamant::comm {

#ifdef ADAMANT_HAVE_CUDA
class NcclCommunicator final : public Communicator {
 public:
  // Collective over `bootstrap`: rank 0 creates the NCCL unique id and broadcasts
  // it over MPI, then every rank joins with its GPU `device` (one GPU per rank).
  // Unless NCCL_NVLS_ENABLE is set, it is set to 0: NVLink multicast stays off.
  // Host waits (set-up, barrier) are watched by `bootstrap`'s watchdog, if it has one.
  NcclCommunicator(const MpiCommunicator& bootstrap, Device device);
  ~NcclCommunicator() override;  // ncclCommDestroy after the comm stream drains
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Device device() const override { return comm_stream_.device(); }
  const char* backend_name() const override { return "NCCL"; }

  // Collectives run on comm_stream(), after whatever order_after() ordered it
  // behind; the caller makes a compute stream wait with handle.wait(stream), or
  // blocks the host with handle.wait(Stream()). Buffers must stay alive until then.
  CommHandle all_reduce_async(Tensor data, ReduceOp op) override;
  CommHandle reduce_scatter_async(Tensor send, Tensor recv, ReduceOp op) override;
  CommHandle all_gather_async(Tensor send, Tensor recv) override;
  CommHandle broadcast_async(Tensor data, int root) override;
  CommHandle send_async(Tensor data, int peer) override;
  CommHandle recv_async(Tensor data, int peer) override;
  // Returns once every rank has reached it and this rank's collectives have completed.
  void barrier() override;
  void order_after(const Stream& after) override { comm_stream_.order_after(after); }

  const Stream& comm_stream() const { return comm_stream_.stream(); }

 private:
  void check(ncclResult_t result, const char* operation) const;
  // Blocks until the comm stream drains, under the watchdog; an asynchronous NCCL error
  // (a peer gone, a network failure) aborts the communicator and throws instead of hanging.
  void synchronize_watched(const char* operation);

  int rank_ = 0;
  int size_ = 0;
  CommStream comm_stream_;
  Buffer barrier_scratch_;  // one int on the GPU, reduced by barrier()
  ncclComm_t comm_ = nullptr;
  std::shared_ptr<CollectiveWatchdog> watchdog_;  // null: host waits are not watched
  const char* group_name_ = "";
};
#endif

// A NcclCommunicator in CUDA builds; throws adamant::Error in CPU-only builds.
std::unique_ptr<Communicator> make_nccl_communicator(const MpiCommunicator& bootstrap, Device device);

}  // namespace adamant::comm
