#pragma once
// Splits the world into tensor-, data- and pipeline-parallel groups in Megatron's order:
// world rank = (pp_rank * dp_size + dp_rank) * tp_size + tp_rank. Tensor-parallel ranks are
// adjacent, the data-parallel groups of a pipeline stage are the next level, and the stages
// are the outermost blocks of ranks. With ranks launched in blocks per host (srun's and
// mpirun's default), each tensor-parallel group then lies inside one host and the
// data-parallel and pipeline groups span the hosts; the grid checks that it does
// (placement.h).
#include <memory>

#include "adamant/comm/collective_watchdog.h"
#include "adamant/comm/communicator.h"
#include "adamant/comm/launcher_environment.h"
#include "adamant/comm/mpi_communicator.h"
#include "adamant/comm/node_topology.h"

namespace adamant::comm {

struct GridOptions {
  // trainer.allow_irregular_node_layout: accept tensor-parallel groups across hosts and
  // hosts with unequal numbers of ranks.
  bool allow_irregular_node_layout = false;
  // trainer.collective_timeout_s: a wait on any of the grid's communicators longer than
  // this ends the job (CollectiveWatchdog); 0 leaves waits unwatched.
  double collective_timeout_s = 0.0;
  // Where the launcher's node-local rank is read from.
  EnvironmentLookup environment = process_environment();
};

class ProcessGrid {
 public:
  // Collective over `world`. Throws adamant::Error, alike on every rank, unless
  // tensor_model_parallel_size divides the world size and the ranks sit on their hosts as
  // check_node_placement wants.
  ProcessGrid(const MpiCommunicator& world, int tensor_model_parallel_size, const GridOptions& options = {});
  // With pipeline_model_parallel_size stages: tp x pp must divide the world size.
  ProcessGrid(const MpiCommunicator& world, int tensor_model_parallel_size, int pipeline_model_parallel_size,
              const GridOptions& options = {});

  int world_rank() const { return world_.rank(); }
  int world_size() const { return world_.size(); }
  int dp_rank() const { return data_parallel_.rank(); }
  int dp_size() const { return data_parallel_.size(); }
  int tp_rank() const { return tensor_parallel_.rank(); }
  int tp_size() const { return tensor_parallel_.size(); }
  int pp_rank() const { return pipeline_.rank(); }  // this rank's pipeline stage
  int pp_size() const { return pipeline_.size(); }
  bool first_stage() const { return pp_rank() == 0; }
  bool last_stage() const { return pp_rank() + 1 == pp_size(); }
  // Hosts, this rank's node-local rank (pick the GPU with it) and host name.
  const NodeTopology& topology() const { return topology_; }

  // Host (MPI) communicators: for host buffers and small control values.
  MpiCommunicator& world() { return world_; }
  MpiCommunicator& data_parallel_group() { return data_parallel_; }
  MpiCommunicator& tensor_parallel_group() { return tensor_parallel_; }
  // The stages of this rank's pipeline (same tp_rank and dp_rank), ordered by stage.
  MpiCommunicator& pipeline_group() { return pipeline_; }
  // The first and the last stage of this rank's pipeline, which hold the tied word embedding
  // (its gradient is summed over them); one rank when pp is 1. The middle stages each hold a
  // group of their own, never used.
  MpiCommunicator& embedding_group() { return embedding_; }

  // Communicators for buffers on `device` (see make_device_communicator);
  // collective over the group.
  std::unique_ptr<Communicator> make_data_parallel_communicator(Device device) const;
  std::unique_ptr<Communicator> make_tensor_parallel_communicator(Device device) const;
  std::unique_ptr<Communicator> make_pipeline_communicator(Device device) const;

 private:
  MpiCommunicator world_;
  NodeTopology topology_;
  std::shared_ptr<CollectiveWatchdog> watchdog_;  // null when collective_timeout_s is 0
  MpiCommunicator data_parallel_;
  MpiCommunicator tensor_parallel_;
  MpiCommunicator pipeline_;
  MpiCommunicator embedding_;
};

// The backend for buffers on `device` over the ranks of `group`: single-process
// when the group has one rank, MPI for CPU memory, NCCL (bootstrapped over
// `group`) for GPU memory. Collective over `group`.
std::unique_ptr<Communicator> make_device_communicator(const MpiCommunicator& group, Device device);

}  // namespace adamant::comm
