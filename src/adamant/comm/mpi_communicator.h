#pragma once
// Collectives over an MPI communicator on host memory, issued as nonblocking
// MPI collectives (MPI_Iallreduce, ...). For a fixed group size and data the
// results are bitwise identical on every rank and from run to run.
#include <mpi.h>

#include <memory>

#include "adamant/comm/collective_watchdog.h"
#include "adamant/comm/communicator.h"
#include "adamant/comm/mpi_reduce_ops.h"

namespace adamant::comm {

class MpiCommunicator final : public Communicator {
 public:
  // Duplicates `comm` (collective over it), so this communicator's traffic never
  // mixes with other users of `comm`. MPI must be initialised (see MpiSession).
  explicit MpiCommunicator(MPI_Comm comm = MPI_COMM_WORLD);
  ~MpiCommunicator() override;  // MPI_Comm_free
  MpiCommunicator(MpiCommunicator&& other) noexcept;
  MpiCommunicator& operator=(MpiCommunicator&& other) noexcept;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  // MPI_Comm_split: the ranks passing the same `color` form a new group, ordered by `key`.
  // Collective over this communicator.
  MpiCommunicator split(int color, int key) const;
  // A duplicate of this communicator (collective), watched by the same watchdog.
  MpiCommunicator duplicate() const;

  // Every later wait on this communicator's collectives (and on those of its splits and
  // duplicates) is watched by `watchdog`; `group` ("data-parallel", ...) names the group
  // in its report and must be a string literal.
  void set_watchdog(std::shared_ptr<CollectiveWatchdog> watchdog, const char* group);

  MPI_Comm mpi_comm() const { return comm_; }
  const std::shared_ptr<CollectiveWatchdog>& watchdog() const { return watchdog_; }
  const char* group_name() const { return group_name_; }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Device device() const override { return Device::cpu(); }
  const char* backend_name() const override { return "MPI"; }

  // Every rank of the group must issue the same collectives in the same order;
  // handles may be waited on in any order. A handle destroyed without wait()
  // still waits, so MPI never writes into memory the caller may have freed.
  // In-place reduce_scatter: MPI reduces into the front of `send`, so the
  // blocks of `send` other than this rank's are left unspecified.
  CommHandle all_reduce_async(Tensor data, ReduceOp op) override;
  CommHandle reduce_scatter_async(Tensor send, Tensor recv, ReduceOp op) override;
  CommHandle all_gather_async(Tensor send, Tensor recv) override;
  CommHandle broadcast_async(Tensor data, int root) override;
  CommHandle send_async(Tensor data, int peer) override;
  CommHandle recv_async(Tensor data, int peer) override;
  void barrier() override;

 private:
  struct Adopt {};
  MpiCommunicator(Adopt, MPI_Comm owned);
  void release() noexcept;

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 0;
  // Shared with pending handles, which need the ops until their collective completes.
  std::shared_ptr<const MpiReduceOps> reduce_ops_;
  std::shared_ptr<CollectiveWatchdog> watchdog_;  // null: waits are not watched
  const char* group_name_ = "world";
};

}  // namespace adamant::comm
