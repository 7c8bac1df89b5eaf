// ProcessGrid under mpirun: Megatron's layout (world rank = dp_rank * tp + tp_rank),
// checked both by the reported ranks and by who is actually in each group.
#include "adamant/comm/process_grid.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "comm/mpi_test_util.h"

namespace adamant::comm {
namespace {

// The world ranks in `group`, gathered through the group itself.
std::vector<std::int32_t> members(MpiCommunicator& group, int world_rank) {
  std::vector<std::int32_t> ranks(static_cast<std::size_t>(group.size()));
  std::int32_t mine = world_rank;
  group.all_gather(Tensor::flat(&mine, DType::i32, Device::cpu(), 1),
                   Tensor::flat(ranks.data(), DType::i32, Device::cpu(), ranks.size()));
  return ranks;
}

void expect_megatron_layout(int tp) {
  SCOPED_TRACE("tensor_model_parallel_size " + std::to_string(tp));
  MpiCommunicator world(MPI_COMM_WORLD);
  ProcessGrid grid(world, tp);
  const int rank = world.rank();
  EXPECT_EQ(grid.world_rank(), rank);
  EXPECT_EQ(grid.world_size(), world.size());
  EXPECT_EQ(grid.tp_size(), tp);
  EXPECT_EQ(grid.dp_size(), world.size() / tp);
  EXPECT_EQ(grid.tp_rank(), rank % tp);
  EXPECT_EQ(grid.dp_rank(), rank / tp);

  std::vector<std::int32_t> expected_tp;  // adjacent ranks
  for (int t = 0; t < tp; ++t) expected_tp.push_back(grid.dp_rank() * tp + t);
  EXPECT_EQ(members(grid.tensor_parallel_group(), rank), expected_tp);
  std::vector<std::int32_t> expected_dp;  // ranks with the same tp_rank, tp apart
  for (int d = 0; d < grid.dp_size(); ++d) expected_dp.push_back(d * tp + grid.tp_rank());
  EXPECT_EQ(members(grid.data_parallel_group(), rank), expected_dp);
}

TEST(ProcessGrid, EveryDividingTensorParallelSizeGivesMegatronLayout) {
  const int size = testing::world_size();
  for (int tp = 1; tp <= size; ++tp) {
    if (size % tp == 0) expect_megatron_layout(tp);
  }
}

// Megatron's order with pipeline stages outermost: rank = (pp_rank * dp + dp_rank) * tp + tp_rank.
void expect_megatron_pipeline_layout(int tp, int pp) {
  SCOPED_TRACE("tp " + std::to_string(tp) + " pp " + std::to_string(pp));
  MpiCommunicator world(MPI_COMM_WORLD);
  ProcessGrid grid(world, tp, pp);
  const int rank = world.rank(), dp = world.size() / (tp * pp);
  const int tp_rank = rank % tp, dp_rank = rank / tp % dp, pp_rank = rank / (tp * dp);
  EXPECT_EQ(grid.tp_rank(), tp_rank);
  EXPECT_EQ(grid.dp_rank(), dp_rank);
  EXPECT_EQ(grid.pp_rank(), pp_rank);
  EXPECT_EQ(grid.dp_size(), dp);
  EXPECT_EQ(grid.pp_size(), pp);
  EXPECT_EQ(grid.first_stage(), pp_rank == 0);
  EXPECT_EQ(grid.last_stage(), pp_rank == pp - 1);
  const auto world_rank_of = [&](int t, int d, int p) { return (p * dp + d) * tp + t; };
  std::vector<std::int32_t> expected;
  for (int t = 0; t < tp; ++t) expected.push_back(world_rank_of(t, dp_rank, pp_rank));
  EXPECT_EQ(members(grid.tensor_parallel_group(), rank), expected);
  expected.clear();
  for (int d = 0; d < dp; ++d) expected.push_back(world_rank_of(tp_rank, d, pp_rank));
  EXPECT_EQ(members(grid.data_parallel_group(), rank), expected);
  expected.clear();
  for (int p = 0; p < pp; ++p) expected.push_back(world_rank_of(tp_rank, dp_rank, p));
  EXPECT_EQ(members(grid.pipeline_group(), rank), expected);
  expected.clear();
  if (grid.first_stage() || grid.last_stage()) {
    expected.push_back(world_rank_of(tp_rank, dp_rank, 0));
    if (pp > 1) expected.push_back(world_rank_of(tp_rank, dp_rank, pp - 1));
  } else {
    expected.push_back(rank);
  }
  EXPECT_EQ(members(grid.embedding_group(), rank), expected);
}

TEST(ProcessGrid, EveryDividingPipelineLayoutGivesMegatronOrder) {
  const int size = testing::world_size();
  for (int tp = 1; tp <= size; ++tp) {
    for (int pp = 1; tp * pp <= size; ++pp) {
      if (size % (tp * pp) == 0) expect_megatron_pipeline_layout(tp, pp);
    }
  }
}

TEST(ProcessGrid, PipelineSizesThatDoNotDivideTheWorldAreAnError) {
  MpiCommunicator world(MPI_COMM_WORLD);
  const int size = world.size();
  int pp = 2;
  while (size % pp == 0) ++pp;
  try {
    ProcessGrid grid(world, 1, pp);
    ADD_FAILURE() << "pipeline_model_parallel_size " << pp << " accepted for world size " << size;
  } catch (const Error& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("model.pipeline_model_parallel_size = " + std::to_string(pp)), std::string::npos) << message;
  }
  EXPECT_THROW(ProcessGrid(world, 1, 0), Error);
}

TEST(ProcessGrid, WorldOfFourWithTensorParallelTwo) {
  if (testing::world_size() != 4) GTEST_SKIP() << "needs exactly 4 ranks";
  MpiCommunicator world(MPI_COMM_WORLD);
  ProcessGrid grid(world, 2);
  const int expected_dp[] = {0, 0, 1, 1};
  const int expected_tp[] = {0, 1, 0, 1};
  EXPECT_EQ(grid.dp_rank(), expected_dp[world.rank()]);
  EXPECT_EQ(grid.tp_rank(), expected_tp[world.rank()]);
  EXPECT_EQ(grid.dp_size(), 2);
  EXPECT_EQ(grid.tp_size(), 2);
}

TEST(ProcessGrid, NonDividingTensorParallelSizeIsAnError) {
  MpiCommunicator world(MPI_COMM_WORLD);
  const int size = world.size();
  // 3 for the spec's world of 4; otherwise the smallest size that does not divide.
  int tp = size == 4 ? 3 : 2;
  while (size % tp == 0) ++tp;
  try {
    ProcessGrid grid(world, tp);
    ADD_FAILURE() << "tensor_model_parallel_size " << tp << " accepted for world size " << size;
  } catch (const Error& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("model.tensor_model_parallel_size = " + std::to_string(tp)), std::string::npos) << message;
    EXPECT_NE(message.find("world size " + std::to_string(size)), std::string::npos) << message;
  }
  EXPECT_THROW(ProcessGrid(world, 0), Error);
}

TEST(ProcessGrid, DeviceCommunicatorsForCpuBuffers) {
  MpiCommunicator world(MPI_COMM_WORLD);
  const int tp = world.size() % 2 == 0 ? 2 : 1;
  ProcessGrid grid(world, tp);
  auto data_parallel = grid.make_data_parallel_communicator(Device::cpu());
  auto tensor_parallel = grid.make_tensor_parallel_communicator(Device::cpu());
  for (auto* comm : {data_parallel.get(), tensor_parallel.get()}) {
    EXPECT_STREQ(comm->backend_name(), comm->size() == 1 ? "single-process" : "MPI");
  }
  EXPECT_EQ(data_parallel->size(), grid.dp_size());
  EXPECT_EQ(data_parallel->rank(), grid.dp_rank());
  EXPECT_EQ(tensor_parallel->size(), grid.tp_size());
  EXPECT_EQ(tensor_parallel->rank(), grid.tp_rank());

  // Sum of world ranks over each group, against the layout's closed form.
  std::int64_t over_dp = world.rank();
  data_parallel->all_reduce(Tensor::flat(&over_dp, DType::i64, Device::cpu(), 1), ReduceOp::sum);
  std::int64_t expected_dp = 0;
  for (int d = 0; d < grid.dp_size(); ++d) expected_dp += d * tp + grid.tp_rank();
  EXPECT_EQ(over_dp, expected_dp);
  std::int64_t over_tp = world.rank();
  tensor_parallel->all_reduce(Tensor::flat(&over_tp, DType::i64, Device::cpu(), 1), ReduceOp::sum);
  std::int64_t expected_tp = 0;
  for (int t = 0; t < tp; ++t) expected_tp += grid.dp_rank() * tp + t;
  EXPECT_EQ(over_tp, expected_tp);
}

}  // namespace
}  // namespace adamant::comm
