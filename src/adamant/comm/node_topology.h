#pragma once
// Which ranks share a host. MPI decides "same host" (MPI_Comm_split_type with
// MPI_COMM_TYPE_SHARED); the launcher's node-local rank (launcher_environment.h)
// orders the ranks of a host when it agrees with MPI, so that rank i on a host is the
// one the launcher bound to GPU i.
#include <mpi.h>

#include <string>
#include <string_view>
#include <vector>

#include "adamant/comm/launcher_environment.h"

namespace adamant::comm {

class NodeTopology {
 public:
  // Collective over `comm`.
  NodeTopology(MPI_Comm comm, const EnvironmentLookup& environment);

  int local_rank() const { return local_rank_; }  // among the ranks on this host
  int local_size() const { return local_size_; }
  int node_index() const { return node_of_rank_[static_cast<std::size_t>(rank_)]; }
  int num_nodes() const { return static_cast<int>(node_names_.size()); }
  // Hosts numbered by their lowest rank: node_of_rank()[r] is rank r's host.
  const std::vector<int>& node_of_rank() const { return node_of_rank_; }
  const std::vector<std::string>& node_names() const { return node_names_; }  // per host
  const std::string& host_name() const { return node_names_[static_cast<std::size_t>(node_index())]; }
  // Where local_rank() came from: the launcher's variables or MPI's node communicator.
  std::string_view local_rank_source() const { return local_rank_source_; }
  // One line for the run's start-up report, e.g. "2 hosts (a, b), 4 ranks on this one, ...".
  std::string describe() const;

 private:
  int rank_ = 0;
  int local_rank_ = 0;
  int local_size_ = 1;
  std::vector<int> node_of_rank_;
  std::vector<std::string> node_names_;
  std::string_view local_rank_source_;
};

// This machine's host name (gethostname), for messages.
std::string current_host_name();

}  // namespace adamant::comm
