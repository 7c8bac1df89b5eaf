// MpiSession when MPI is already initialised (by the test main): it must not
// finalise MPI, and its node-local rank must match MPI's own answer.
#include "adamant/comm/mpi_session.h"

#include <gtest/gtest.h>

#include "comm/mpi_test_util.h"

namespace adamant::comm {
namespace {

TEST(MpiSession, JoinsAnAlreadyInitialisedMpi) {
  {
    MpiSession session;
    EXPECT_FALSE(session.owns_mpi());
    EXPECT_EQ(session.thread_level(), MPI_THREAD_MULTIPLE);  // what the test main asked for
    EXPECT_EQ(session.world_rank(), testing::world_rank());
    EXPECT_EQ(session.world_size(), testing::world_size());
    const NodeLocalRank node = query_node_local_rank(MPI_COMM_WORLD);
    EXPECT_EQ(session.local_rank(), node.rank);
    EXPECT_EQ(session.local_size(), node.size);
  }
  int finalized = 1;
  MPI_Finalized(&finalized);
  EXPECT_EQ(finalized, 0) << "a session that did not initialise MPI finalised it";
}

TEST(MpiSession, SingleNodeLocalRankIsTheWorldRank) {
  // mpirun in the tests starts every rank on this machine.
  const NodeLocalRank node = query_node_local_rank(MPI_COMM_WORLD);
  EXPECT_EQ(node.rank, testing::world_rank());
  EXPECT_EQ(node.size, testing::world_size());
}

}  // namespace
}  // namespace adamant::comm
