// Placement checks on made-up host tables: tensor-parallel groups inside hosts, equal
// ranks per host, one GPU per rank.
#include "adamant/comm/placement.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "adamant/core/error.h"

namespace adamant::comm {
namespace {

const std::vector<std::string> kHosts = {"node-a", "node-b", "node-c"};
const std::span<const std::string> kTwoHosts = std::span(kHosts).first(2);

// The message of the adamant::Error that `body` throws ("" when it throws none).
template <typename Body>
std::string error_of(Body body) {
  try {
    body();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(NodePlacement, TensorParallelGroupsInsideHostsPass) {
  const std::vector<int> two_by_four = {0, 0, 0, 0, 1, 1, 1, 1};
  for (int tp : {1, 2, 4}) {
    EXPECT_NO_THROW(check_node_placement(two_by_four, kTwoHosts, tp, false)) << "tp " << tp;
  }
}

TEST(NodePlacement, TensorParallelGroupAcrossHostsIsNamed) {
  const std::vector<int> three_by_two = {0, 0, 1, 1, 2, 2};  // tp 3: ranks 0..2 on node-a and node-b
  const std::string message = error_of([&] { check_node_placement(three_by_two, kHosts, 3, false); });
  EXPECT_NE(message.find("ranks 0..2"), std::string::npos) << message;
  EXPECT_NE(message.find("spans hosts node-a and node-b"), std::string::npos) << message;
  EXPECT_NE(message.find("trainer.allow_irregular_node_layout=true"), std::string::npos) << message;
  EXPECT_NO_THROW(check_node_placement(three_by_two, kHosts, 3, true));
}

TEST(NodePlacement, RoundRobinPlacementSplitsEveryGroup) {
  const std::vector<int> cyclic = {0, 1, 0, 1};  // mpirun --map-by node
  const std::string message = error_of([&] { check_node_placement(cyclic, kTwoHosts, 2, false); });
  EXPECT_NE(message.find("ranks 0..1"), std::string::npos) << message;
  EXPECT_NO_THROW(check_node_placement(cyclic, kTwoHosts, 1, false));  // data parallel only: any placement
}

TEST(NodePlacement, UnequalRanksPerHostAreNamed) {
  const std::vector<int> uneven = {0, 0, 0, 1};
  const std::string message = error_of([&] { check_node_placement(uneven, kTwoHosts, 1, false); });
  EXPECT_NE(message.find("node-a has 3, node-b has 1"), std::string::npos) << message;
  EXPECT_NO_THROW(check_node_placement(uneven, kTwoHosts, 1, true));
}

TEST(GpuForLocalRank, OneGpuPerRank) {
  EXPECT_EQ(gpu_for_local_rank(0, 4, 4, "h"), 0);
  EXPECT_EQ(gpu_for_local_rank(3, 4, 8, "h"), 3);
  // The launcher bound each rank to one GPU (CUDA_VISIBLE_DEVICES per task).
  EXPECT_EQ(gpu_for_local_rank(5, 8, 1, "h"), 0);
}

TEST(GpuForLocalRank, SharedGpusAndNoGpuAreErrors) {
  const std::string shared = error_of([] { gpu_for_local_rank(0, 8, 4, "node-a"); });
  EXPECT_NE(shared.find("host node-a runs 8 ranks but shows them 4 GPUs"), std::string::npos) << shared;
  const std::string none = error_of([] { gpu_for_local_rank(0, 1, 0, "node-a"); });
  EXPECT_NE(none.find("no GPU"), std::string::npos) << none;
}

}  // namespace
}  // namespace adamant::comm
