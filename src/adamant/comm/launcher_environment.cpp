#include "adamant/comm/launcher_environment.h"

#include <cstdlib>

#include "adamant/core/error.h"
#include "adamant/core/number_text.h"

namespace adamant::comm {

namespace {

std::optional<int> integer_variable(const EnvironmentLookup& environment, const char* name) {
  const char* text = environment(name);
  if (text == nullptr) return std::nullopt;
  return number_from_text<int>(text);
}

std::optional<LauncherLocalRank> checked(std::optional<int> rank, std::optional<int> size, std::string_view source) {
  if (!rank || !size || *size < 1 || *rank < 0 || *rank >= *size) return std::nullopt;
  return LauncherLocalRank{*rank, *size, source};
}

}  // namespace

EnvironmentLookup process_environment() {
  return [](const char* name) -> const char* { return std::getenv(name); };
}

std::optional<int> slurm_tasks_on_node(std::string_view tasks_per_node, int node_id) {
  if (node_id < 0) return std::nullopt;
  int first_node = 0;
  std::optional<int> found;
  if (tasks_per_node.empty()) return std::nullopt;
  for (bool more = true; more;) {
    const std::size_t comma = tasks_per_node.find(',');
    const std::string_view item = tasks_per_node.substr(0, comma);
    more = comma != std::string_view::npos;
    tasks_per_node = more ? tasks_per_node.substr(comma + 1) : std::string_view();
    // "<tasks>" or "<tasks>(x<nodes>)"
    const std::size_t paren = item.find("(x");
    const std::optional<int> tasks = number_from_text<int>(item.substr(0, paren));
    std::optional<int> nodes = 1;
    if (paren != std::string_view::npos) {
      if (item.size() < paren + 4 || item.back() != ')') return std::nullopt;
      nodes = number_from_text<int>(item.substr(paren + 2, item.size() - paren - 3));
    }
    if (!tasks || !nodes || *tasks < 1 || *nodes < 1) return std::nullopt;
    if (!found && node_id < first_node + *nodes) found = *tasks;  // the rest is still checked
    first_node += *nodes;
  }
  return found;
}

std::optional<LauncherLocalRank> local_rank_from_launcher(const EnvironmentLookup& environment) {
  if (auto open_mpi = checked(integer_variable(environment, "OMPI_COMM_WORLD_LOCAL_RANK"),
                              integer_variable(environment, "OMPI_COMM_WORLD_LOCAL_SIZE"),
                              "OMPI_COMM_WORLD_LOCAL_RANK/OMPI_COMM_WORLD_LOCAL_SIZE")) {
    return open_mpi;
  }
  if (auto hydra = checked(integer_variable(environment, "MPI_LOCALRANKID"),
                           integer_variable(environment, "MPI_LOCALNRANKS"), "MPI_LOCALRANKID/MPI_LOCALNRANKS")) {
    return hydra;
  }
  const char* tasks_per_node = environment("SLURM_TASKS_PER_NODE");
  const std::optional<int> node_id = integer_variable(environment, "SLURM_NODEID");
  if (tasks_per_node != nullptr && node_id) {
    return checked(integer_variable(environment, "SLURM_LOCALID"), slurm_tasks_on_node(tasks_per_node, *node_id),
                   "SLURM_LOCALID/SLURM_TASKS_PER_NODE");
  }
  return std::nullopt;
}

void check_launcher_world_size(const EnvironmentLookup& environment, int mpi_world_size) {
  // SLURM_STEP_NUM_TASKS is set for the tasks of an srun step only, not in a batch script.
  const std::optional<int> step_tasks = integer_variable(environment, "SLURM_STEP_NUM_TASKS");
  if (!step_tasks || environment("OMPI_COMM_WORLD_SIZE") != nullptr) return;
  ADAMANT_CHECK(mpi_world_size != 1 || *step_tasks == 1,
                "srun started {} tasks but MPI sees each of them as a world of one rank: srun and the MPI "
                "library do not share a process-management interface; launch with srun --mpi=pmix (or "
                "--mpi=pmi2; `srun --mpi=list` shows what this Slurm offers), or use mpirun inside the "
                "allocation",
                *step_tasks);
}

}  // namespace adamant::comm
