// The node-local rank as launchers export it, from environments made up by the tests.
#include "adamant/comm/launcher_environment.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "adamant/core/error.h"

namespace adamant::comm {
namespace {

EnvironmentLookup lookup(const std::map<std::string, std::string>& variables) {
  return [variables](const char* name) -> const char* {
    const auto found = variables.find(name);
    return found == variables.end() ? nullptr : found->second.c_str();
  };
}

TEST(SlurmTasksPerNode, ExpandsTheCompressedForm) {
  // "2(x3),1": nodes 0, 1, 2 run 2 tasks each, node 3 runs 1.
  for (int node = 0; node < 3; ++node) EXPECT_EQ(slurm_tasks_on_node("2(x3),1", node), 2) << "node " << node;
  EXPECT_EQ(slurm_tasks_on_node("2(x3),1", 3), 1);
  EXPECT_EQ(slurm_tasks_on_node("2(x3),1", 4), std::nullopt);
  EXPECT_EQ(slurm_tasks_on_node("8", 0), 8);
  EXPECT_EQ(slurm_tasks_on_node("4,3,4(x2)", 1), 3);
  EXPECT_EQ(slurm_tasks_on_node("4,3,4(x2)", 3), 4);
}

TEST(SlurmTasksPerNode, RejectsMalformedText) {
  for (const char* text : {"", "x", "2(x", "2(3)", "2(x0)", "0", "-1", "2,,1", "2(xa)"}) {
    EXPECT_EQ(slurm_tasks_on_node(text, 0), std::nullopt) << "'" << text << "'";
  }
  EXPECT_EQ(slurm_tasks_on_node("2", -1), std::nullopt);
}

TEST(LauncherLocalRank, ReadsOpenMpi) {
  const auto local =
      local_rank_from_launcher(lookup({{"OMPI_COMM_WORLD_LOCAL_RANK", "3"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}}));
  ASSERT_TRUE(local);
  EXPECT_EQ(local->rank, 3);
  EXPECT_EQ(local->size, 4);
  EXPECT_NE(local->source.find("OMPI_COMM_WORLD_LOCAL_RANK"), std::string_view::npos);
}

TEST(LauncherLocalRank, ReadsSlurmFromTheNodesTaskCount) {
  const auto local = local_rank_from_launcher(
      lookup({{"SLURM_LOCALID", "1"}, {"SLURM_NODEID", "3"}, {"SLURM_TASKS_PER_NODE", "4(x3),2"}}));
  ASSERT_TRUE(local);
  EXPECT_EQ(local->rank, 1);
  EXPECT_EQ(local->size, 2);
}

TEST(LauncherLocalRank, ReadsMpichHydra) {
  const auto local = local_rank_from_launcher(lookup({{"MPI_LOCALRANKID", "0"}, {"MPI_LOCALNRANKS", "2"}}));
  ASSERT_TRUE(local);
  EXPECT_EQ(local->rank, 0);
  EXPECT_EQ(local->size, 2);
}

TEST(LauncherLocalRank, TheMpiLaunchersWordComesBeforeSlurms) {
  // mpirun inside an allocation: its ranks inherit the Slurm variables of mpirun's daemon.
  const auto local = local_rank_from_launcher(lookup({{"OMPI_COMM_WORLD_LOCAL_RANK", "2"},
                                                      {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"},
                                                      {"SLURM_LOCALID", "0"},
                                                      {"SLURM_NODEID", "0"},
                                                      {"SLURM_TASKS_PER_NODE", "1"}}));
  ASSERT_TRUE(local);
  EXPECT_EQ(local->rank, 2);
  EXPECT_EQ(local->size, 4);
}

TEST(LauncherLocalRank, IgnoresMissingOrInconsistentVariables) {
  EXPECT_FALSE(local_rank_from_launcher(lookup({})));
  EXPECT_FALSE(local_rank_from_launcher(lookup({{"OMPI_COMM_WORLD_LOCAL_RANK", "1"}})));
  EXPECT_FALSE(
      local_rank_from_launcher(lookup({{"OMPI_COMM_WORLD_LOCAL_RANK", "4"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}})));
  EXPECT_FALSE(
      local_rank_from_launcher(lookup({{"OMPI_COMM_WORLD_LOCAL_RANK", "one"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}})));
  EXPECT_FALSE(
      local_rank_from_launcher(lookup({{"SLURM_LOCALID", "2"}, {"SLURM_NODEID", "0"}, {"SLURM_TASKS_PER_NODE", "2"}})));
  EXPECT_FALSE(local_rank_from_launcher(lookup({{"SLURM_LOCALID", "0"}, {"SLURM_TASKS_PER_NODE", "2"}})));
}

TEST(LauncherWorldSize, SrunWithoutPmiIsExplained) {
  try {
    check_launcher_world_size(lookup({{"SLURM_STEP_NUM_TASKS", "8"}}), 1);
    FAIL() << "8 srun tasks in a world of 1 passed";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("srun started 8 tasks"), std::string::npos) << message;
    EXPECT_NE(message.find("--mpi=pmix"), std::string::npos) << message;
  }
  EXPECT_NO_THROW(check_launcher_world_size(lookup({{"SLURM_STEP_NUM_TASKS", "8"}}), 8));
  EXPECT_NO_THROW(check_launcher_world_size(lookup({{"SLURM_STEP_NUM_TASKS", "1"}}), 1));
  EXPECT_NO_THROW(check_launcher_world_size(lookup({}), 1));
  // mpirun of one rank inside a multi-task step: Open MPI's own variables say it is meant.
  EXPECT_NO_THROW(check_launcher_world_size(lookup({{"SLURM_STEP_NUM_TASKS", "4"}, {"OMPI_COMM_WORLD_SIZE", "1"}}), 1));
}

}  // namespace
}  // namespace adamant::comm
