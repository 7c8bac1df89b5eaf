#pragma once
// A group of one rank: reductions leave the data as it is, reduce-scatter and
// all-gather copy. Lets the same orchestration code run without MPI or NCCL
// (one process, or a parallel group of size 1).
#include "adamant/comm/comm_stream.h"
#include "adamant/comm/communicator.h"

namespace adamant::comm {

class SingleProcessCommunicator final : public Communicator {
 public:
  // Buffers live on `device`; on a GPU, copies run on the communicator's own stream.
  explicit SingleProcessCommunicator(Device device = Device::cpu());

  int rank() const override { return 0; }
  int size() const override { return 1; }
  Device device() const override { return comm_stream_.device(); }
  const char* backend_name() const override { return "single-process"; }

  CommHandle all_reduce_async(Tensor data, ReduceOp op) override;
  CommHandle reduce_scatter_async(Tensor send, Tensor recv, ReduceOp op) override;
  CommHandle all_gather_async(Tensor send, Tensor recv) override;
  CommHandle broadcast_async(Tensor data, int root) override;
  // A group of one rank has no peer: these throw.
  CommHandle send_async(Tensor data, int peer) override;
  CommHandle recv_async(Tensor data, int peer) override;
  void barrier() override;
  void order_after(const Stream& after) override { comm_stream_.order_after(after); }

  const Stream& comm_stream() const { return comm_stream_.stream(); }

 private:
  CommStream comm_stream_;
};

}  // namespace adamant::comm
