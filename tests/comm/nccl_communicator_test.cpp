// NcclCommunicator on CUDA buffers, run as `mpirun -np 2` on a machine with at
// least 2 GPUs (each rank takes the GPU of its node-local rank). The same known
// inputs and closed-form results as the MPI tests; in addition, stream ordering.
#include "adamant/comm/nccl_communicator.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "adamant/comm/collective_watchdog.h"
#include "adamant/comm/mpi_session.h"
#include "adamant/comm/process_grid.h"
#include "adamant/comm/single_process_communicator.h"
#include "adamant/core/buffer.h"
#include "comm/collective_reference.h"
#include "comm/mpi_test_util.h"

namespace adamant::comm {
namespace {

using testing::expect_identical_on_all_ranks;
using testing::input_value;
using testing::kCollectiveDTypes;
using testing::make_input;
using testing::mismatches;
using testing::reduced_value;

constexpr std::size_t kCounts[] = {1, 7, 1001};

// This rank's GPU: the node-local rank, so that ranks on one node never share one.
Device this_rank_gpu() {
  const MpiSession session;  // MPI is already up (test main); this only reads the local rank
  const int visible = cuda_device_count();
  if (visible < session.local_size()) {
    fail(
        "comm_nccl_tests: {} ranks on this node but {} GPU(s) visible; run with one GPU per rank "
        "(mpirun -np 2 on a machine with 2 GPUs) and check CUDA_VISIBLE_DEVICES",
        session.local_size(), visible);
  }
  return Device::cuda(session.local_rank());
}

// A device copy of host bytes; every transfer finishes before it returns, so the
// collectives (on their own non-blocking stream) never race with it.
class DeviceArray {
 public:
  DeviceArray(const std::vector<std::byte>& host, DType dtype, Device device)
      : buffer_(host.size(), device), dtype_(dtype) {
    copy_bytes(buffer_.data(), device, host.data(), Device::cpu(), host.size());
    check(cudaDeviceSynchronize());
  }
  Tensor tensor() { return Tensor::of(buffer_, dtype_); }
  std::vector<std::byte> download() const {
    std::vector<std::byte> host(buffer_.bytes());
    copy_bytes(host.data(), Device::cpu(), buffer_.data(), buffer_.device(), host.size());
    return host;
  }

 private:
  static void check(cudaError_t status) {
    if (status != cudaSuccess) fail("CUDA: {}", cudaGetErrorString(status));
  }
  Buffer buffer_;
  DType dtype_;
};

std::string describe(DType dtype, ReduceOp op, std::size_t n) {
  return std::string(dtype_name(dtype)) + " " + std::string(comm::reduce_op_name(op)) + " n=" + std::to_string(n);
}

// NCCL's avg scales each input by 1/size before summing, so its rounding can differ
// from sum-then-divide; sum and max are exact for these inputs.
double avg_tolerance(DType dtype, ReduceOp op) {
  if (op != ReduceOp::avg) return 0;
  switch (dtype) {
    case DType::bf16:
      return 2e-2;
    case DType::f16:
      return 2e-3;
    case DType::f32:
      return 1e-6;
    default:
      return 1e-14;
  }
}

class NcclCommunicatorTest : public ::testing::Test {
 protected:
  NcclCommunicatorTest() : gpu_(this_rank_gpu()), world_(MPI_COMM_WORLD), comm_(world_, gpu_) {}
  Device gpu_;
  MpiCommunicator world_;
  NcclCommunicator comm_;
};

TEST_F(NcclCommunicatorTest, RankSizeAndDevice) {
  EXPECT_EQ(comm_.rank(), world_.rank());
  EXPECT_EQ(comm_.size(), world_.size());
  EXPECT_EQ(comm_.device(), gpu_);
  EXPECT_STREQ(comm_.backend_name(), "NCCL");
}

TEST_F(NcclCommunicatorTest, AllReduceEveryDTypeAndOp) {
  for (DType dtype : kCollectiveDTypes) {
    for (ReduceOp op : testing::ops_for(dtype)) {
      for (std::size_t n : kCounts) {
        SCOPED_TRACE(describe(dtype, op, n));
        DeviceArray data(make_input(dtype, comm_.rank(), n), dtype, gpu_);
        comm_.all_reduce(data.tensor(), op);
        const auto result = data.download();
        EXPECT_EQ(mismatches(
                      dtype, result.data(), n, [&](std::size_t i) { return reduced_value(dtype, op, comm_.size(), i); },
                      avg_tolerance(dtype, op)),
                  "");
        expect_identical_on_all_ranks(result);
      }
    }
  }
}

TEST_F(NcclCommunicatorTest, ReduceScatterInPlaceAndOutOfPlace) {
  const auto size = static_cast<std::size_t>(comm_.size());
  for (DType dtype : kCollectiveDTypes) {
    for (ReduceOp op : testing::ops_for(dtype)) {
      for (std::size_t n : kCounts) {
        const std::size_t first = static_cast<std::size_t>(comm_.rank()) * n;
        const auto expected = [&](std::size_t i) { return reduced_value(dtype, op, comm_.size(), first + i); };
        SCOPED_TRACE(describe(dtype, op, n));
        DeviceArray send(make_input(dtype, comm_.rank(), size * n), dtype, gpu_);
        DeviceArray recv(std::vector<std::byte>(n * dtype_size(dtype)), dtype, gpu_);
        comm_.reduce_scatter(send.tensor(), recv.tensor(), op);
        const auto out_of_place = recv.download();
        EXPECT_EQ(mismatches(dtype, out_of_place.data(), n, expected, avg_tolerance(dtype, op)), "") << "out of place";

        comm_.reduce_scatter(send.tensor(), send.tensor().slice(first, n), op);
        const auto whole = send.download();
        EXPECT_EQ(mismatches(dtype, whole.data() + first * dtype_size(dtype), n, expected, avg_tolerance(dtype, op)),
                  "")
            << "in place";
      }
    }
  }
}

TEST_F(NcclCommunicatorTest, AllGatherInPlaceAndOutOfPlace) {
  const auto size = static_cast<std::size_t>(comm_.size());
  for (DType dtype : kCollectiveDTypes) {
    for (std::size_t n : kCounts) {
      SCOPED_TRACE(describe(dtype, ReduceOp::sum, n));
      const auto expected = [&](std::size_t i) { return input_value(dtype, static_cast<int>(i / n), i % n); };
      const std::size_t first = static_cast<std::size_t>(comm_.rank()) * n;
      DeviceArray send(make_input(dtype, comm_.rank(), n), dtype, gpu_);
      DeviceArray recv(std::vector<std::byte>(size * n * dtype_size(dtype)), dtype, gpu_);
      comm_.all_gather(send.tensor(), recv.tensor());
      const auto out_of_place = recv.download();
      EXPECT_EQ(mismatches(dtype, out_of_place.data(), size * n, expected), "") << "out of place";

      std::vector<std::byte> own_block_only(size * n * dtype_size(dtype), std::byte{0x5a});
      const auto mine = make_input(dtype, comm_.rank(), n);
      std::copy(mine.begin(), mine.end(),
                own_block_only.begin() + static_cast<std::ptrdiff_t>(first * dtype_size(dtype)));
      DeviceArray gathered(own_block_only, dtype, gpu_);
      comm_.all_gather(gathered.tensor().slice(first, n), gathered.tensor());
      const auto in_place = gathered.download();
      EXPECT_EQ(mismatches(dtype, in_place.data(), size * n, expected), "") << "in place";
    }
  }
}

TEST_F(NcclCommunicatorTest, BroadcastFromEveryRoot) {
  for (DType dtype : kCollectiveDTypes) {
    for (int root = 0; root < comm_.size(); ++root) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " root " + std::to_string(root));
      DeviceArray data(make_input(dtype, comm_.rank(), 13), dtype, gpu_);
      comm_.broadcast(data.tensor(), root);
      const auto result = data.download();
      EXPECT_EQ(mismatches(dtype, result.data(), 13, [&](std::size_t i) { return input_value(dtype, root, i); }), "");
    }
  }
}

TEST_F(NcclCommunicatorTest, LargeFloatAllReduceIsBitwiseReproducible) {
  constexpr std::size_t n = (1u << 22) + 3;  // large enough for NCCL's multi-channel algorithms
  for (DType dtype : {DType::f32, DType::bf16}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    std::vector<std::byte> input(n * dtype_size(dtype));
    for (std::size_t i = 0; i < n; ++i) {
      testing::store_value(dtype, input.data(), i, std::sin(0.37 * static_cast<double>(i) + comm_.rank()));
    }
    DeviceArray first(input, dtype, gpu_);
    DeviceArray second(input, dtype, gpu_);
    comm_.all_reduce(first.tensor(), ReduceOp::sum);
    comm_.all_reduce(second.tensor(), ReduceOp::sum);
    const auto first_result = first.download();
    EXPECT_EQ(first_result, second.download()) << "two identical all-reduces gave different bits";
    expect_identical_on_all_ranks(first_result);
    const double tolerance = dtype == DType::f32 ? 1e-5 : 6e-2;
    std::size_t outside_tolerance = 0;
    for (std::size_t i = 0; i < n; i += 997) {
      double exact = 0;
      alignas(8) std::byte rounded_input[8];
      for (int r = 0; r < comm_.size(); ++r) {
        testing::store_value(dtype, rounded_input, 0, std::sin(0.37 * static_cast<double>(i) + r));
        exact += testing::load_value(dtype, rounded_input, 0);
      }
      if (std::abs(testing::load_value(dtype, first_result.data(), i) - exact) > tolerance) ++outside_tolerance;
    }
    EXPECT_EQ(outside_tolerance, 0u);
  }
}

// The GPU path of the interface: inputs written on a compute stream, the
// collective ordered after it, the compute stream (not the host) waiting on the
// handles, in an order other than issue order.
TEST_F(NcclCommunicatorTest, StreamOrderedAsyncHandles) {
  Stream compute(gpu_);
  const auto size = static_cast<std::size_t>(comm_.size());
  const auto reduce_input = make_input(DType::f32, comm_.rank(), 4099);
  const auto gather_input = make_input(DType::bf16, comm_.rank(), 513);
  Buffer reduced(reduce_input.size(), gpu_);
  Buffer gather_send(gather_input.size(), gpu_);
  Buffer gathered(size * gather_input.size(), gpu_);
  auto* stream = static_cast<cudaStream_t>(compute.handle());
  ASSERT_EQ(cudaMemcpyAsync(reduced.data(), reduce_input.data(), reduce_input.size(), cudaMemcpyDefault, stream),
            cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(gather_send.data(), gather_input.data(), gather_input.size(), cudaMemcpyDefault, stream),
            cudaSuccess);

  comm_.order_after(compute);
  CommHandle reduce_handle = comm_.all_reduce_async(Tensor::of(reduced, DType::f32), ReduceOp::sum);
  CommHandle gather_handle =
      comm_.all_gather_async(Tensor::of(gather_send, DType::bf16), Tensor::of(gathered, DType::bf16));
  EXPECT_TRUE(reduce_handle.pending());
  gather_handle.wait(compute);
  reduce_handle.wait(compute);

  std::vector<std::byte> reduce_result(reduced.bytes());
  std::vector<std::byte> gather_result(gathered.bytes());
  ASSERT_EQ(cudaMemcpyAsync(reduce_result.data(), reduced.data(), reduced.bytes(), cudaMemcpyDefault, stream),
            cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(gather_result.data(), gathered.data(), gathered.bytes(), cudaMemcpyDefault, stream),
            cudaSuccess);
  compute.synchronize();
  EXPECT_EQ(mismatches(DType::f32, reduce_result.data(), 4099,
                       [&](std::size_t i) { return reduced_value(DType::f32, ReduceOp::sum, comm_.size(), i); }),
            "");
  EXPECT_EQ(mismatches(DType::bf16, gather_result.data(), size * 513,
                       [&](std::size_t i) { return input_value(DType::bf16, static_cast<int>(i / 513), i % 513); }),
            "");
}

TEST_F(NcclCommunicatorTest, BarrierAndClearErrors) {
  comm_.barrier();
  std::vector<float> host(4);
  EXPECT_THROW(comm_.all_reduce(Tensor::flat(host.data(), DType::f32, Device::cpu(), 4), ReduceOp::sum), Error);
  Buffer halves(8, gpu_);
  EXPECT_THROW(comm_.all_reduce(Tensor::of(halves, DType::u16), ReduceOp::sum), Error);
  EXPECT_THROW(comm_.all_reduce(Tensor::of(halves, DType::i32), ReduceOp::avg), Error);
  EXPECT_THROW(comm_.broadcast(Tensor::of(halves, DType::f32), comm_.size()), Error);
  comm_.barrier();
}

TEST(SingleProcessCommunicatorOnGpu, CopiesOnItsStream) {
  const Device gpu = this_rank_gpu();
  SingleProcessCommunicator comm(gpu);
  DeviceArray send(make_input(DType::f32, 0, 9), DType::f32, gpu);
  DeviceArray recv(std::vector<std::byte>(9 * 4), DType::f32, gpu);
  comm.reduce_scatter(send.tensor(), recv.tensor(), ReduceOp::sum);
  auto result = recv.download();
  EXPECT_EQ(mismatches(DType::f32, result.data(), 9, [](std::size_t i) { return input_value(DType::f32, 0, i); }), "");
  DeviceArray gathered(std::vector<std::byte>(9 * 4), DType::f32, gpu);
  comm.all_gather_async(send.tensor(), gathered.tensor()).wait(Stream());
  result = gathered.download();
  EXPECT_EQ(mismatches(DType::f32, result.data(), 9, [](std::size_t i) { return input_value(DType::f32, 0, i); }), "");
}

TEST(ProcessGridOnGpu, TensorParallelGroupGetsNccl) {
  MpiCommunicator world(MPI_COMM_WORLD);
  const Device gpu = this_rank_gpu();
  ProcessGrid grid(world, world.size());  // one tensor-parallel group, data-parallel groups of one
  auto tensor_parallel = grid.make_tensor_parallel_communicator(gpu);
  auto data_parallel = grid.make_data_parallel_communicator(gpu);
  EXPECT_STREQ(tensor_parallel->backend_name(), world.size() > 1 ? "NCCL" : "single-process");
  EXPECT_STREQ(data_parallel->backend_name(), "single-process");
  DeviceArray ranks(make_input(DType::i32, world.rank(), 5), DType::i32, gpu);
  tensor_parallel->all_reduce(ranks.tensor(), ReduceOp::sum);
  const auto result = ranks.download();
  EXPECT_EQ(mismatches(DType::i32, result.data(), 5,
                       [&](std::size_t i) { return reduced_value(DType::i32, ReduceOp::sum, world.size(), i); }),
            "");
}

TEST(NcclWatchdog, ABarrierWaitingForALateRankIsReported) {
  MpiCommunicator world(MPI_COMM_WORLD);
  if (world.size() < 2) GTEST_SKIP() << "needs a second rank to be late";
  const Device gpu = this_rank_gpu();
  {
    NcclCommunicator warm_up(world, gpu);  // CUDA and NCCL's one-off start-up, unwatched
    warm_up.barrier();
  }
  std::mutex mutex;
  std::string report;
  auto dog = std::make_shared<CollectiveWatchdog>(std::chrono::milliseconds(1000), world.rank(), "this-host",
                                                  [&](const std::string& text) {
                                                    const std::lock_guard lock(mutex);
                                                    report = text;
                                                  });
  MpiCommunicator watched = world.duplicate();
  watched.set_watchdog(dog, "tensor-parallel");
  {
    NcclCommunicator comm(watched, gpu);  // takes the bootstrap's watchdog
    comm.barrier();
    // Rank 1 comes 4 s late: the others' barrier waits pass the 1 s timeout, then complete.
    if (world.rank() == 1) std::this_thread::sleep_for(std::chrono::milliseconds(4000));
    comm.barrier();
  }
  watched.set_watchdog(nullptr, "tensor-parallel");
  dog.reset();  // the last owner: joins the watchdog's thread
  const std::lock_guard lock(mutex);
  if (world.rank() != 1) {
    EXPECT_NE(report.find("for barrier over the tensor-parallel group"), std::string::npos) << report;
  }
}

}  // namespace
}  // namespace adamant::comm
