// SingleProcessCommunicator on host memory: a group of one rank.
#include "adamant/comm/single_process_communicator.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

namespace adamant::comm {
namespace {

Tensor view(std::vector<float>& values) {
  return Tensor::flat(values.data(), DType::f32, Device::cpu(), values.size());
}

TEST(SingleProcessCommunicator, ReductionsOverOneRankKeepTheData) {
  SingleProcessCommunicator comm;
  EXPECT_EQ(comm.rank(), 0);
  EXPECT_EQ(comm.size(), 1);
  EXPECT_TRUE(comm.device().is_cpu());
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max}) {
    std::vector<float> data = {1.5f, -2.0f, 3.25f};
    comm.all_reduce(view(data), op);
    EXPECT_EQ(data, (std::vector<float>{1.5f, -2.0f, 3.25f}));
  }
  std::vector<float> data = {4.0f, 5.0f};
  comm.broadcast(view(data), 0);
  EXPECT_EQ(data, (std::vector<float>{4.0f, 5.0f}));
}

TEST(SingleProcessCommunicator, ReduceScatterAndAllGatherCopy) {
  SingleProcessCommunicator comm;
  std::vector<float> send(7);
  std::iota(send.begin(), send.end(), 1.0f);
  std::vector<float> recv(7, 0.0f);
  comm.reduce_scatter(view(send), view(recv), ReduceOp::avg);
  EXPECT_EQ(recv, send);
  std::vector<float> gathered(7, 0.0f);
  comm.all_gather(view(send), view(gathered));
  EXPECT_EQ(gathered, send);
  // In place: the one block is the whole buffer.
  comm.reduce_scatter(view(send), view(send), ReduceOp::sum);
  comm.all_gather(view(send), view(send));
  EXPECT_EQ(send, recv);
}

TEST(SingleProcessCommunicator, HandlesOnTheCpuAreComplete) {
  SingleProcessCommunicator comm;
  std::vector<float> send = {1.0f, 2.0f};
  std::vector<float> recv(2, 0.0f);
  CommHandle handle = comm.all_gather_async(view(send), view(recv));
  EXPECT_FALSE(handle.pending());
  EXPECT_EQ(recv, send);
}

TEST(SingleProcessCommunicator, RejectsInvalidArguments) {
  SingleProcessCommunicator comm;
  std::vector<float> send(4);
  std::vector<float> recv(3);
  EXPECT_THROW(comm.reduce_scatter(view(send), view(recv), ReduceOp::sum), Error);
  EXPECT_THROW(comm.all_gather(view(recv), view(send)), Error);
  EXPECT_THROW(comm.broadcast(view(send), 1), Error);
  std::vector<std::int32_t> integers(2);
  EXPECT_THROW(comm.all_reduce(Tensor::flat(integers.data(), DType::i32, Device::cpu(), 2), ReduceOp::avg), Error);
  EXPECT_THROW(comm.all_reduce(Tensor::flat(send.data(), DType::f32, Device::cuda(0), 4), ReduceOp::sum), Error);
}

}  // namespace
}  // namespace adamant::comm
