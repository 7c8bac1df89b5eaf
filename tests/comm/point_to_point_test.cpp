// Point-to-point sends and receives of MpiCommunicator under mpirun (1 to 8 ranks): a ring
// of every dtype against the sender's known values, several messages between two ranks in
// posting order, and the errors for a peer that is not another rank of the group.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "adamant/comm/mpi_communicator.h"
#include "adamant/comm/single_process_communicator.h"
#include "adamant/core/error.h"
#include "comm/collective_reference.h"
#include "comm/mpi_test_util.h"

namespace adamant::comm {
namespace {

using testing::host_view;
using testing::input_value;
using testing::kCollectiveDTypes;
using testing::make_input;
using testing::mismatches;

TEST(PointToPoint, RingOfEveryDType) {
  MpiCommunicator comm(MPI_COMM_WORLD);
  if (comm.size() == 1) GTEST_SKIP() << "a ring needs two ranks";
  const int next = (comm.rank() + 1) % comm.size(), previous = (comm.rank() + comm.size() - 1) % comm.size();
  for (DType dtype : kCollectiveDTypes) {
    for (const std::size_t n : {1u, 1001u}) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " n=" + std::to_string(n));
      auto send = make_input(dtype, comm.rank(), n);
      std::vector<std::byte> recv(send.size(), std::byte{0xAB});
      // The receive first, then the send: neither blocks the other.
      CommHandle arriving = comm.recv_async(host_view(recv, dtype), previous);
      CommHandle leaving = comm.send_async(host_view(send, dtype), next);
      arriving.wait(Stream());
      leaving.wait(Stream());
      EXPECT_EQ(mismatches(dtype, recv.data(), n, [&](std::size_t i) { return input_value(dtype, previous, i); }), "");
    }
  }
}

// Stages pass activations forward and gradients back: messages between two ranks pair up in
// the order each side posted them, whatever the order of the waits.
TEST(PointToPoint, MessagesPairInPostingOrder) {
  MpiCommunicator comm(MPI_COMM_WORLD);
  if (comm.size() == 1) GTEST_SKIP() << "needs two ranks";
  if (comm.rank() > 1) return;
  constexpr int kMessages = 5;
  const int peer = 1 - comm.rank();
  std::vector<std::vector<float>> out(kMessages), in(kMessages);
  std::vector<CommHandle> handles;
  for (int m = 0; m < kMessages; ++m) {
    out[static_cast<std::size_t>(m)].assign(64, static_cast<float>(100 * comm.rank() + m));
    in[static_cast<std::size_t>(m)].assign(64, -1.0f);
  }
  for (int m = 0; m < kMessages; ++m) {
    auto& o = out[static_cast<std::size_t>(m)];
    auto& i = in[static_cast<std::size_t>(m)];
    handles.push_back(comm.send_async(Tensor::flat(o.data(), DType::f32, Device::cpu(), o.size()), peer));
    handles.push_back(comm.recv_async(Tensor::flat(i.data(), DType::f32, Device::cpu(), i.size()), peer));
  }
  for (auto it = handles.rbegin(); it != handles.rend(); ++it) it->wait(Stream());  // last posted first
  for (int m = 0; m < kMessages; ++m) {
    EXPECT_EQ(in[static_cast<std::size_t>(m)], std::vector<float>(64, static_cast<float>(100 * peer + m)))
        << "message " << m;
  }
}

TEST(PointToPoint, RefusesAPeerOutsideTheGroupOrItself) {
  MpiCommunicator comm(MPI_COMM_WORLD);
  std::vector<float> data(4);
  const Tensor view = Tensor::flat(data.data(), DType::f32, Device::cpu(), data.size());
  EXPECT_THROW(comm.send_async(view, comm.rank()), Error);
  EXPECT_THROW(comm.recv_async(view, comm.size()), Error);
  EXPECT_THROW(comm.send_async(view, -1), Error);
  SingleProcessCommunicator alone;
  try {
    alone.send_async(view, 0);
    ADD_FAILURE() << "a group of one rank has no peer";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("peer 0 is not another rank"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace adamant::comm
