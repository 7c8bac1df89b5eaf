#include "adamant/comm/process_grid.h"

#include "adamant/comm/nccl_communicator.h"
#include "adamant/comm/single_process_communicator.h"
#include "adamant/core/error.h"

namespace adamant::comm {

namespace {

// Checked before any collective so that every rank fails alike, without a hang.
MPI_Comm checked_world(const MpiCommunicator& world, int tensor_model_parallel_size) {
  ADAMANT_CHECK(tensor_model_parallel_size >= 1, "model.tensor_model_parallel_size = {} must be at least 1",
                tensor_model_parallel_size);
  ADAMANT_CHECK(world.size() % tensor_model_parallel_size == 0,
                "model.tensor_model_parallel_size = {} does not divide the world size {} (number of MPI ranks); "
                "choose a tensor-parallel size that divides {}, or launch a multiple of {} ranks",
                tensor_model_parallel_size, world.size(), world.size(), tensor_model_parallel_size);
  return world.mpi_comm();
}

}  // namespace

ProcessGrid::ProcessGrid(const MpiCommunicator& world, int tensor_model_parallel_size)
    : world_(checked_world(world, tensor_model_parallel_size)),
      // Same tp_rank -> one data-parallel group, ordered by dp_rank.
      data_parallel_(
          world_.split(world_.rank() % tensor_model_parallel_size, world_.rank() / tensor_model_parallel_size)),
      // Same dp_rank -> one tensor-parallel group of adjacent ranks, ordered by tp_rank.
      tensor_parallel_(
          world_.split(world_.rank() / tensor_model_parallel_size, world_.rank() % tensor_model_parallel_size)) {}

std::unique_ptr<Communicator> ProcessGrid::make_data_parallel_communicator(Device device) const {
  return make_device_communicator(data_parallel_, device);
}

std::unique_ptr<Communicator> ProcessGrid::make_tensor_parallel_communicator(Device device) const {
  return make_device_communicator(tensor_parallel_, device);
}

std::unique_ptr<Communicator> make_device_communicator(const MpiCommunicator& group, Device device) {
  if (group.size() == 1) return std::make_unique<SingleProcessCommunicator>(device);
  if (device.is_cpu()) return std::make_unique<MpiCommunicator>(group.mpi_comm());
  return make_nccl_communicator(group, device);
}

}  // namespace adamant::comm
