#pragma once
// A test wrapper around a Communicator whose collectives run only when their
// handle is waited for (and never if it is dropped). Real backends progress
// every outstanding collective inside any wait, which hides a forgotten wait on
// the CPU; with this wrapper, data that was never waited for never arrives, so
// a missing wait (e.g. a stale tied embedding under overlap_param_sync) shows up
// as a wrong result. Every rank must wait in the same order, as the optimizers do.
#include <functional>
#include <memory>
#include <utility>

#include "adamant/comm/communicator.h"

namespace adamant::optim::testing {

class DeferredCommunicator final : public comm::Communicator {
 public:
  explicit DeferredCommunicator(comm::Communicator& inner) : inner_(inner) {}

  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  Device device() const override { return inner_.device(); }
  const char* backend_name() const override { return "deferred"; }

  comm::CommHandle all_reduce_async(Tensor data, comm::ReduceOp op) override {
    return deferred([this, data, op] { inner_.all_reduce(data, op); });
  }
  comm::CommHandle reduce_scatter_async(Tensor send, Tensor recv, comm::ReduceOp op) override {
    return deferred([this, send, recv, op] { inner_.reduce_scatter(send, recv, op); });
  }
  comm::CommHandle all_gather_async(Tensor send, Tensor recv) override {
    return deferred([this, send, recv] { inner_.all_gather(send, recv); });
  }
  comm::CommHandle broadcast_async(Tensor data, int root) override {
    return deferred([this, data, root] { inner_.broadcast(data, root); });
  }
  // Point to point is not deferred: two ranks that each ran a blocking send in their first
  // wait would wait on each other. The optimizers use collectives only.
  comm::CommHandle send_async(Tensor data, int peer) override { return inner_.send_async(data, peer); }
  comm::CommHandle recv_async(Tensor data, int peer) override { return inner_.recv_async(data, peer); }
  void barrier() override { inner_.barrier(); }

 private:
  class Deferred final : public comm::CommHandle::Impl {
   public:
    explicit Deferred(std::function<void()> run) : run_(std::move(run)) {}
    void wait(const Stream& /*stream*/) override { run_(); }

   private:
    std::function<void()> run_;
  };

  static comm::CommHandle deferred(std::function<void()> run) {
    return comm::CommHandle(std::make_unique<Deferred>(std::move(run)));
  }

  comm::Communicator& inner_;
};

}  // namespace adamant::optim::testing
