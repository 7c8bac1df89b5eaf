#include "adamant/comm/node_topology.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>

#include "adamant/comm/mpi_check.h"

namespace adamant::comm {

namespace {

constexpr std::size_t kHostNameBytes = 256;

// A communicator freed when it goes out of scope.
class ScopedComm {
 public:
  ScopedComm() = default;
  ~ScopedComm() {
    if (comm != MPI_COMM_NULL && mpi_is_active()) MPI_Comm_free(&comm);
  }
  ScopedComm(const ScopedComm&) = delete;
  ScopedComm& operator=(const ScopedComm&) = delete;
  MPI_Comm comm = MPI_COMM_NULL;
};

int rank_in(MPI_Comm comm) {
  int rank = 0;
  check_mpi(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank");
  return rank;
}

int size_of(MPI_Comm comm) {
  int size = 0;
  check_mpi(MPI_Comm_size(comm, &size), "MPI_Comm_size");
  return size;
}

// The launcher's node-local ranks count when every rank of the host has one and together
// they number the host's ranks 0..size-1; a leftover variable (say Slurm's, inherited
// through another launcher) fails this and MPI's order is used instead. Collective over `node`.
bool launcher_agrees(MPI_Comm node, int node_size, const std::optional<LauncherLocalRank>& launcher) {
  const int mine = launcher && launcher->size == node_size ? launcher->rank : -1;
  std::vector<int> all(static_cast<std::size_t>(node_size));
  check_mpi(MPI_Allgather(&mine, 1, MPI_INT, all.data(), 1, MPI_INT, node), "MPI_Allgather(node-local ranks)");
  std::sort(all.begin(), all.end());
  for (int i = 0; i < node_size; ++i) {
    if (all[static_cast<std::size_t>(i)] != i) return false;
  }
  return true;
}

}  // namespace

std::string current_host_name() {
  std::array<char, kHostNameBytes> name{};
  if (::gethostname(name.data(), name.size() - 1) != 0) return "unknown-host";
  return std::string(name.data());
}

NodeTopology::NodeTopology(MPI_Comm comm, const EnvironmentLookup& environment) {
  rank_ = rank_in(comm);
  const int size = size_of(comm);
  ScopedComm node;
  check_mpi(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node.comm),
            "MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)");
  const int node_rank = rank_in(node.comm);
  local_size_ = size_of(node.comm);
  const auto launcher = local_rank_from_launcher(environment);
  if (launcher_agrees(node.comm, local_size_, launcher)) {
    local_rank_ = launcher->rank;
    local_rank_source_ = launcher->source;
  } else {
    local_rank_ = node_rank;
    local_rank_source_ = "MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)";
  }

  // Every rank learns each rank's host leader (the host's lowest rank) and each host's name.
  int leader = rank_;
  check_mpi(MPI_Bcast(&leader, 1, MPI_INT, 0, node.comm), "MPI_Bcast(host leader)");
  std::vector<int> leader_of_rank(static_cast<std::size_t>(size));
  check_mpi(MPI_Allgather(&leader, 1, MPI_INT, leader_of_rank.data(), 1, MPI_INT, comm), "MPI_Allgather(host leaders)");
  std::array<char, kHostNameBytes> my_name{};
  const std::string host = current_host_name();
  std::memcpy(my_name.data(), host.data(), std::min(host.size(), my_name.size() - 1));
  std::vector<char> names(static_cast<std::size_t>(size) * kHostNameBytes);
  check_mpi(MPI_Allgather(my_name.data(), static_cast<int>(kHostNameBytes), MPI_CHAR, names.data(),
                          static_cast<int>(kHostNameBytes), MPI_CHAR, comm),
            "MPI_Allgather(host names)");
  node_of_rank_.assign(static_cast<std::size_t>(size), -1);
  std::vector<int> node_of_leader(static_cast<std::size_t>(size), -1);
  for (int r = 0; r < size; ++r) {
    const auto l = static_cast<std::size_t>(leader_of_rank[static_cast<std::size_t>(r)]);
    if (node_of_leader[l] < 0) {
      node_of_leader[l] = static_cast<int>(node_names_.size());
      node_names_.emplace_back(names.data() + l * kHostNameBytes);
    }
    node_of_rank_[static_cast<std::size_t>(r)] = node_of_leader[l];
  }
}

std::string NodeTopology::describe() const {
  constexpr std::size_t kNamesShown = 4;
  std::string names;
  for (std::size_t n = 0; n < node_names_.size() && n < kNamesShown; ++n) {
    names += (n == 0 ? "" : ", ") + node_names_[n];
  }
  if (node_names_.size() > kNamesShown) names += ", ...";
  return fmt::format("{} host(s) ({}), {} rank(s) on this one; node-local rank from {}", num_nodes(), names,
                     local_size_, local_rank_source_);
}

}  // namespace adamant::comm
