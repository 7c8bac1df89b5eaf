// trainer.devices x trainer.num_nodes against what the launcher started, under mpirun
// on one host: the check itself on the real node topology, and a run that refuses to
// start on every rank.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <string>

#include "adamant/comm/node_topology.h"
#include "adamant/core/error.h"
#include "trainer_test_util.h"

namespace adamant {
namespace {

using ::testing::HasSubstr;
using testing::world_rank;

int world_size() {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

// The message check_launch throws for these keys ("" when it accepts them).
std::string launch_error(int devices, int num_nodes, bool allow_irregular = false) {
  const comm::NodeTopology topology(MPI_COMM_WORLD, comm::process_environment());
  train::TrainerOptions trainer;
  trainer.devices = devices;
  trainer.num_nodes = num_nodes;
  trainer.allow_irregular_node_layout = allow_irregular;
  try {
    trainer.check_launch(world_size(), topology);
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

TEST(TrainerLaunch, DevicesTimesNodesMustEqualTheWorld) {
  const int ranks = world_size();  // every rank on this one host
  EXPECT_EQ(launch_error(ranks, 1), "");
  EXPECT_EQ(launch_error(train::TrainerOptions::kAutoDevices, 1), "");
  const std::string more = launch_error(ranks + 1, 1);
  EXPECT_THAT(more, HasSubstr("trainer.devices (" + std::to_string(ranks + 1) + ") x trainer.num_nodes (1) = " +
                              std::to_string(ranks + 1) + " ranks, but the launcher started " + std::to_string(ranks) +
                              " MPI rank(s) on 1 host(s)"));
  EXPECT_THAT(more, HasSubstr("trainer.devices=-1"));
  if (ranks % 2 == 0) {
    // The right product on the wrong number of hosts.
    EXPECT_THAT(launch_error(ranks / 2, 2), HasSubstr("trainer.num_nodes is 2, but the launcher started " +
                                                      std::to_string(ranks) + " MPI rank(s) on 1 host(s) (" +
                                                      std::to_string(ranks) + " per host); set trainer.num_nodes=1"));
  }
  EXPECT_THAT(launch_error(train::TrainerOptions::kAutoDevices, 3), HasSubstr("trainer.num_nodes is 3"));
  EXPECT_THAT(launch_error(ranks + 1, 1, true), HasSubstr("trainer.devices ("));  // the product holds regardless
}

TEST(TrainerLaunch, ARunWithTheWrongDeviceCountStopsEveryRank) {
  const auto dir = testing::shared_temp_dir("launch");
  const auto prefix = testing::write_random_dataset(dir, 50, 50257);
  train::TrainConfig config = testing::tiny_config(prefix, dir / "run");
  config.trainer.devices = world_size() + 1;
  train::TrainOptions options;
  options.quiet = true;
  try {
    train::run_training(config, options);
    ADD_FAILURE() << "a run of " << world_size() << " rank(s) accepted trainer.devices=" << config.trainer.devices;
  } catch (const Error& error) {
    EXPECT_THAT(std::string(error.what()),
                HasSubstr("but the launcher started " + std::to_string(world_size()) + " MPI rank(s)"));
  }
  config.trainer.devices = world_size();
  config.trainer.max_steps = 1;
  EXPECT_EQ(train::run_training(config, options).train_losses.size(), 1U) << "rank " << world_rank();
}

}  // namespace
}  // namespace adamant
