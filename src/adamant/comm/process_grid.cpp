#include "adamant/comm/process_grid.h"

#include <algorithm>
#include <chrono>
#include <string>

#include "adamant/comm/nccl_communicator.h"
#include "adamant/comm/placement.h"
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

std::shared_ptr<CollectiveWatchdog> make_watchdog(const GridOptions& options, int rank, const std::string& host) {
  ADAMANT_CHECK(options.collective_timeout_s >= 0.0,
                "trainer.collective_timeout_s = {} must be 0 (no timeout) or a positive number of seconds",
                options.collective_timeout_s);
  if (options.collective_timeout_s == 0.0) return nullptr;
  const auto timeout = std::chrono::milliseconds(static_cast<std::int64_t>(options.collective_timeout_s * 1000.0));
  return std::make_shared<CollectiveWatchdog>(std::max(timeout, std::chrono::milliseconds(1)), rank, host);
}

}  // namespace

ProcessGrid::ProcessGrid(const MpiCommunicator& world, int tensor_model_parallel_size, const GridOptions& options)
    : world_(checked_world(world, tensor_model_parallel_size)),
      topology_(world_.mpi_comm(), options.environment),
      watchdog_(make_watchdog(options, world_.rank(), topology_.host_name())),
      // Same tp_rank -> one data-parallel group, ordered by dp_rank.
      data_parallel_(
          world_.split(world_.rank() % tensor_model_parallel_size, world_.rank() / tensor_model_parallel_size)),
      // Same dp_rank -> one tensor-parallel group of adjacent ranks, ordered by tp_rank.
      tensor_parallel_(
          world_.split(world_.rank() / tensor_model_parallel_size, world_.rank() % tensor_model_parallel_size)) {
  // Every rank holds the same host table, so every rank reaches the same verdict.
  check_node_placement(topology_.node_of_rank(), topology_.node_names(), tensor_model_parallel_size,
                       options.allow_irregular_node_layout);
  if (watchdog_) {
    world_.set_watchdog(watchdog_, "world");
    data_parallel_.set_watchdog(watchdog_, "data-parallel");
    tensor_parallel_.set_watchdog(watchdog_, "tensor-parallel");
  }
}

std::unique_ptr<Communicator> ProcessGrid::make_data_parallel_communicator(Device device) const {
  return make_device_communicator(data_parallel_, device);
}

std::unique_ptr<Communicator> ProcessGrid::make_tensor_parallel_communicator(Device device) const {
  return make_device_communicator(tensor_parallel_, device);
}

std::unique_ptr<Communicator> make_device_communicator(const MpiCommunicator& group, Device device) {
  if (group.size() == 1) return std::make_unique<SingleProcessCommunicator>(device);
  if (device.is_cpu()) return std::make_unique<MpiCommunicator>(group.duplicate());
  return make_nccl_communicator(group, device);
}

}  // namespace adamant::comm
