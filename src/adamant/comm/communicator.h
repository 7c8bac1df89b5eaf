#pragma once
// Collective communication over a group of ranks. Backends: single process,
// MPI (host memory) and NCCL (GPU memory). Every collective is asynchronous and
// returns a CommHandle; the synchronous forms just wait on it.
#include <memory>

#include "adamant/core/device.h"
#include "adamant/core/stream.h"
#include "adamant/core/tensor.h"

namespace adamant::comm {

enum class ReduceOp { sum, avg, max };

// Completion of one asynchronous collective.
class CommHandle {
 public:
  class Impl {
   public:
    virtual ~Impl() = default;
    virtual void wait(const Stream& stream) = 0;
  };
  CommHandle() = default;
  explicit CommHandle(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

  // Orders `stream` after the collective: on the CPU this blocks until it is done,
  // on CUDA the stream waits on an event (the host does not block).
  void wait(const Stream& stream) {
    if (impl_) impl_->wait(stream);
    impl_.reset();
  }
  bool pending() const { return impl_ != nullptr; }

 private:
  std::unique_ptr<Impl> impl_;
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual Device device() const = 0;  // where the buffers passed in live
  virtual const char* backend_name() const = 0;

  // In place over `data`.
  virtual CommHandle all_reduce_async(Tensor data, ReduceOp op) = 0;
  // send has size()*n elements, recv n; rank r receives the reduction of block r.
  // send and recv may not overlap, except recv == send.slice(rank()*n, n) (in place).
  virtual CommHandle reduce_scatter_async(Tensor send, Tensor recv, ReduceOp op) = 0;
  // send has n elements, recv size()*n; block r of recv is rank r's send.
  // In place when send == recv.slice(rank()*n, n).
  virtual CommHandle all_gather_async(Tensor send, Tensor recv) = 0;
  virtual CommHandle broadcast_async(Tensor data, int root) = 0;
  // Point to point within the group (pipeline stages): `data` goes to, or arrives from, rank
  // `peer` (another rank of the group). A send pairs with the peer's receive of the same size;
  // several between two ranks pair up in the order each side posts them.
  virtual CommHandle send_async(Tensor data, int peer) = 0;
  virtual CommHandle recv_async(Tensor data, int peer) = 0;
  virtual void barrier() = 0;

  // For a CUDA backend, the stream on which collectives are issued after waiting
  // for work already enqueued on `after`. CPU: no-op.
  virtual void order_after(const Stream& after) { (void)after; }

  void all_reduce(Tensor data, ReduceOp op) { all_reduce_async(data, op).wait(Stream()); }
  void reduce_scatter(Tensor send, Tensor recv, ReduceOp op) { reduce_scatter_async(send, recv, op).wait(Stream()); }
  void all_gather(Tensor send, Tensor recv) { all_gather_async(send, recv).wait(Stream()); }
  void broadcast(Tensor data, int root) { broadcast_async(data, root).wait(Stream()); }
};

}  // namespace adamant::comm
