#pragma once
// Splits the world into data-parallel and tensor-parallel groups as Megatron
// does: tensor-parallel ranks are adjacent, world rank = dp_rank * tp_size + tp_rank.
#include <memory>

#include "adamant/comm/communicator.h"
#include "adamant/comm/mpi_communicator.h"

namespace adamant::comm {

class ProcessGrid {
 public:
  // Collective over `world`. Throws adamant::Error unless tensor_model_parallel_size
  // divides the world size.
  ProcessGrid(const MpiCommunicator& world, int tensor_model_parallel_size);

  int world_rank() const { return world_.rank(); }
  int world_size() const { return world_.size(); }
  int dp_rank() const { return data_parallel_.rank(); }
  int dp_size() const { return data_parallel_.size(); }
  int tp_rank() const { return tensor_parallel_.rank(); }
  int tp_size() const { return tensor_parallel_.size(); }

  // Host (MPI) communicators: for host buffers and small control values.
  MpiCommunicator& world() { return world_; }
  MpiCommunicator& data_parallel_group() { return data_parallel_; }
  MpiCommunicator& tensor_parallel_group() { return tensor_parallel_; }

  // Communicators for buffers on `device` (see make_device_communicator);
  // collective over the group.
  std::unique_ptr<Communicator> make_data_parallel_communicator(Device device) const;
  std::unique_ptr<Communicator> make_tensor_parallel_communicator(Device device) const;

 private:
  MpiCommunicator world_;
  MpiCommunicator data_parallel_;
  MpiCommunicator tensor_parallel_;
};

// The backend for buffers on `device` over the ranks of `group`: single-process
// when the group has one rank, MPI for CPU memory, NCCL (bootstrapped over
// `group`) for GPU memory. Collective over `group`.
std::unique_ptr<Communicator> make_device_communicator(const MpiCommunicator& group, Device device);

}  // namespace adamant::comm
