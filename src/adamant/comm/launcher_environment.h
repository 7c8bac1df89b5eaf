#pragma once
// What the job launcher tells each rank about its place on its node, read from the
// environment it exports: Open MPI's mpirun (OMPI_COMM_WORLD_LOCAL_RANK/_SIZE), MPICH's
// Hydra (MPI_LOCALRANKID/MPI_LOCALNRANKS) and Slurm's srun (SLURM_LOCALID with
// SLURM_TASKS_PER_NODE and SLURM_NODEID). The environment is passed in as a lookup so
// that tests can give one of their own.
#include <functional>
#include <optional>
#include <string_view>

namespace adamant::comm {

// name -> value, or nullptr when unset (std::getenv's contract).
using EnvironmentLookup = std::function<const char*(const char*)>;
EnvironmentLookup process_environment();

struct LauncherLocalRank {
  int rank = 0;             // this rank's index among the ranks of its node
  int size = 1;             // ranks on its node
  std::string_view source;  // the variables it came from, for messages
};

// The first launcher whose variables are all present and well formed, in the order
// Open MPI, MPICH, Slurm (mpirun inside a Slurm allocation passes its ranks Slurm's
// variables of its own daemons, so the MPI launcher's word comes first).
std::optional<LauncherLocalRank> local_rank_from_launcher(const EnvironmentLookup& environment);

// Tasks on node `node_id` from SLURM_TASKS_PER_NODE's compressed form, e.g.
// "2(x3),1" = 2, 2, 2, 1 tasks on nodes 0..3. nullopt when malformed or out of range.
std::optional<int> slurm_tasks_on_node(std::string_view tasks_per_node, int node_id);

// Throws adamant::Error when srun started several tasks that MPI sees as separate
// one-rank worlds (srun without a PMI plugin MPI understands), naming the fix.
void check_launcher_world_size(const EnvironmentLookup& environment, int mpi_world_size);

}  // namespace adamant::comm
