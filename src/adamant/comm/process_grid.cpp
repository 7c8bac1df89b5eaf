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
MPI_Comm checked_world(const MpiCommunicator& world, int tp, int pp) {
  ADAMANT_CHECK(tp >= 1, "model.tensor_model_parallel_size = {} must be at least 1", tp);
  ADAMANT_CHECK(pp >= 1, "model.pipeline_model_parallel_size = {} must be at least 1", pp);
  ADAMANT_CHECK(world.size() % tp == 0,
                "model.tensor_model_parallel_size = {} does not divide the world size {} (number of MPI ranks); "
                "choose a tensor-parallel size that divides {}, or launch a multiple of {} ranks",
                tp, world.size(), world.size(), tp);
  ADAMANT_CHECK(world.size() % (tp * pp) == 0,
                "model.tensor_model_parallel_size = {} x model.pipeline_model_parallel_size = {} = {} does not divide "
                "the world size {} (number of MPI ranks); launch a multiple of {} ranks or choose sizes whose "
                "product divides {}",
                tp, pp, tp * pp, world.size(), tp * pp, world.size());
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
    : ProcessGrid(world, tensor_model_parallel_size, 1, options) {}

ProcessGrid::ProcessGrid(const MpiCommunicator& world, int tp, int pp, const GridOptions& options)
    : world_(checked_world(world, tp, pp)),
      topology_(world_.mpi_comm(), options.environment),
      watchdog_(make_watchdog(options, world_.rank(), topology_.host_name())),
      // Same tp_rank and stage -> one data-parallel group, ordered by dp_rank.
      data_parallel_(world_.split(world_.rank() % tp + tp * (world_.rank() / (world_.size() / pp)),
                                  world_.rank() % (world_.size() / pp) / tp)),
      // Same dp_rank and stage -> one tensor-parallel group of adjacent ranks, ordered by tp_rank.
      tensor_parallel_(world_.split(world_.rank() / tp, world_.rank() % tp)),
      // Same position inside a stage -> one pipeline, ordered by stage.
      pipeline_(world_.split(world_.rank() % (world_.size() / pp), world_.rank() / (world_.size() / pp))),
      // The first and last stages of each pipeline; every other rank alone (MPI_Comm_split needs all).
      embedding_(
          world_.split(world_.rank() / (world_.size() / pp) == 0 || world_.rank() / (world_.size() / pp) == pp - 1
                           ? world_.rank() % (world_.size() / pp)
                           : world_.size() + world_.rank(),
                       world_.rank())) {
  // Every rank holds the same host table, so every rank reaches the same verdict.
  check_node_placement(topology_.node_of_rank(), topology_.node_names(), tp, options.allow_irregular_node_layout);
  if (watchdog_) {
    world_.set_watchdog(watchdog_, "world");
    data_parallel_.set_watchdog(watchdog_, "data-parallel");
    tensor_parallel_.set_watchdog(watchdog_, "tensor-parallel");
    pipeline_.set_watchdog(watchdog_, "pipeline");
    embedding_.set_watchdog(watchdog_, "embedding");
  }
}

std::unique_ptr<Communicator> ProcessGrid::make_data_parallel_communicator(Device device) const {
  return make_device_communicator(data_parallel_, device);
}

std::unique_ptr<Communicator> ProcessGrid::make_tensor_parallel_communicator(Device device) const {
  return make_device_communicator(tensor_parallel_, device);
}

std::unique_ptr<Communicator> ProcessGrid::make_pipeline_communicator(Device device) const {
  return make_device_communicator(pipeline_, device);
}

std::unique_ptr<Communicator> make_device_communicator(const MpiCommunicator& group, Device device) {
  if (group.size() == 1) return std::make_unique<SingleProcessCommunicator>(device);
  if (device.is_cpu()) return std::make_unique<MpiCommunicator>(group.duplicate());
  return make_nccl_communicator(group, device);
}

}  // namespace adamant::comm
