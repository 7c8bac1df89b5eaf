// NodeTopology under mpirun on one machine: every rank on one host; the launcher's
// node-local ranks order the host's ranks when they agree with MPI, and are ignored when
// they do not. Also: a watched wait on a grid communicator is reported.
#include "adamant/comm/node_topology.h"

#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "adamant/comm/process_grid.h"
#include "comm/mpi_test_util.h"

namespace adamant::comm {
namespace {

EnvironmentLookup local_rank_environment(int rank, int size) {
  return [variables = std::map<std::string, std::string>{{"OMPI_COMM_WORLD_LOCAL_RANK", std::to_string(rank)},
                                                         {"OMPI_COMM_WORLD_LOCAL_SIZE", std::to_string(size)}}](
             const char* name) -> const char* {
    const auto found = variables.find(name);
    return found == variables.end() ? nullptr : found->second.c_str();
  };
}

TEST(NodeTopology, OneHostHoldsEveryRank) {
  const int rank = testing::world_rank();
  const int size = testing::world_size();
  const NodeTopology topology(MPI_COMM_WORLD, process_environment());
  EXPECT_EQ(topology.num_nodes(), 1);
  EXPECT_EQ(topology.node_index(), 0);
  EXPECT_EQ(topology.local_size(), size);
  EXPECT_EQ(topology.local_rank(), rank);  // mpirun numbers the ranks of one host in order
  EXPECT_EQ(topology.node_of_rank(), std::vector<int>(static_cast<std::size_t>(size), 0));
  EXPECT_EQ(topology.host_name(), current_host_name());
}

TEST(NodeTopology, TheLaunchersOrderIsTakenWhenItNumbersTheHost) {
  const int rank = testing::world_rank();
  const int size = testing::world_size();
  const NodeTopology topology(MPI_COMM_WORLD, local_rank_environment(size - 1 - rank, size));
  EXPECT_EQ(topology.local_rank(), size - 1 - rank);
  EXPECT_NE(topology.local_rank_source().find("OMPI_COMM_WORLD_LOCAL_RANK"), std::string_view::npos);
}

TEST(NodeTopology, ALauncherOrderThatDisagreesWithMpiIsIgnored) {
  const int rank = testing::world_rank();
  const int size = testing::world_size();
  // Every rank claims local rank 0 of 1 (a leftover from another launcher); valid alone,
  // wrong together unless there is one rank.
  const NodeTopology topology(MPI_COMM_WORLD, local_rank_environment(0, 1));
  EXPECT_EQ(topology.local_rank(), rank);
  if (size > 1) {
    EXPECT_NE(topology.local_rank_source().find("MPI_Comm_split_type"), std::string_view::npos);
  }
}

TEST(ProcessGridWatchdog, AWaitOnALateRankIsReportedForItsGroup) {
  if (testing::world_size() < 2) GTEST_SKIP() << "needs a second rank to be late";
  MpiCommunicator world(MPI_COMM_WORLD);
  ProcessGrid grid(world, 1);
  std::mutex mutex;
  std::string report;
  auto dog = std::make_shared<CollectiveWatchdog>(std::chrono::milliseconds(100), grid.world_rank(), "this-host",
                                                  [&](const std::string& text) {
                                                    const std::lock_guard lock(mutex);
                                                    report = text;
                                                  });
  MpiCommunicator group = grid.data_parallel_group().duplicate();
  group.set_watchdog(dog, "data-parallel");
  // Rank 1 comes 1 s late: rank 0's wait passes the 0.1 s timeout, then completes.
  if (grid.world_rank() == 1) std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  group.barrier();
  std::int32_t value = 1;
  if (grid.world_rank() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  group.all_reduce(Tensor::flat(&value, DType::i32, Device::cpu(), 1), ReduceOp::sum);
  EXPECT_EQ(value, grid.world_size());
  group.set_watchdog(nullptr, "data-parallel");
  dog.reset();  // the last owner: joins the watchdog's thread
  const std::lock_guard lock(mutex);
  // Rank 1 waited only in the all-reduce (for rank 0), every other rank in the barrier (for rank 1).
  const std::string expected = grid.world_rank() == 1 ? "for all_reduce over the data-parallel group"
                                                      : "for barrier over the data-parallel group";
  EXPECT_NE(report.find(expected), std::string::npos) << "rank " << grid.world_rank() << ": '" << report << "'";
}

}  // namespace
}  // namespace adamant::comm
