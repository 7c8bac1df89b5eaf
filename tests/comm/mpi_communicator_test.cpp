// MpiCommunicator under mpirun (1 to 4 ranks): every collective, dtype and
// reduce op against values computed directly from the known per-rank inputs.
#include "adamant/comm/mpi_communicator.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include "adamant/core/half.h"
#include "comm/collective_reference.h"
#include "comm/mpi_test_util.h"

namespace adamant::comm {
namespace {

using testing::expect_identical_on_all_ranks;
using testing::host_view;
using testing::input_value;
using testing::kCollectiveDTypes;
using testing::load_value;
using testing::make_input;
using testing::mismatches;
using testing::reduced_value;

constexpr std::size_t kCounts[] = {1, 7, 1001};

std::string describe(DType dtype, ReduceOp op, std::size_t n) {
  return std::string(dtype_name(dtype)) + " " + std::string(comm::reduce_op_name(op)) + " n=" + std::to_string(n);
}

TEST(MpiCommunicator, RankAndSizeMatchTheWorld) {
  MpiCommunicator comm(MPI_COMM_WORLD);
  EXPECT_EQ(comm.rank(), testing::world_rank());
  EXPECT_EQ(comm.size(), testing::world_size());
  EXPECT_TRUE(comm.device().is_cpu());
  EXPECT_NE(comm.mpi_comm(), MPI_COMM_WORLD);  // a duplicate, not the world itself
}

TEST(MpiCommunicator, AllReduceEveryDTypeAndOp) {
  MpiCommunicator comm(MPI_COMM_WORLD);
  for (DType dtype : kCollectiveDTypes) {
    for (ReduceOp op : testing::ops_for(dtype)) {
      for (std::size_t n : kCounts) {
        SCOPED_TRACE(describe(dtype, op, n));
        auto data = make_input(dtype, comm.rank(), n);
        comm.all_reduce(host_view(data, dtype), op);
        EXPECT_EQ(
            mismatches(dtype, data.data(), n, [&](std::size_t i) { return reduced_value(dtype, op, comm.size(), i); }),
            "");
        expect_identical_on_all_ranks(data);
      }
    }
  }
}

TEST(MpiCommunicator, ReduceScatterOutOfPlaceEveryDTypeAndOp) {
  MpiCommunicator comm(MPI_COMM_WORLD);
  const auto size = static_cast<std::size_t>(comm.size());
  for (DType dtype : kCollectiveDTypes) {
    for (ReduceOp op : testing::ops_for(dtype)) {
      for (std::size_t n : kCounts) {
        SCOPED_TRACE(describe(dtype, op, n));
        auto send = make_input(dtype, comm.rank(), size * n);
        const auto send_before = send;
        std::vector<std::byte> recv(n * dtype_size(dtype));
        comm.reduce_scatter(host_view(send, dtype), host_view(recv, dtype), op);
        const std::size_t first = static_cast<std::size_t>(comm.rank()) * n;
        EXPECT_EQ(mismatches(dtype, recv.data(), n,
                             [&](std::size_t i) { return reduced_value(dtype, op, comm.size(), first + i); }),
                  "");
        EXPECT_EQ(send, send_before) << "out-of-place reduce_scatter modified its input";
      }
    }
  }
}

TEST(MpiCommunicator, ReduceScatterInPlaceEveryDTypeAndOp) {
  MpiCommunicator comm(MPI_COMM_WORLD);
  const auto size = static_cast<std::size_t>(comm.size());
  for (DType dtype : kCollectiveDTypes) {
    for (ReduceOp op : testing::ops_for(dtype)) {
      for (std::size_t n : kCounts) {
        SCOPED_TRACE(describe(dtype, op, n));
        auto buffer = make_input(dtype, comm.rank(), size * n);
        const Tensor whole = host_view(buffer, dtype);
        const std::size_t first = static_cast<std::size_t>(comm.rank()) * n;
        comm.reduce_scatter(whole, whole.slice(first, n), op);
        EXPECT_EQ(mismatches(dtype, host_view(buffer, dtype).slice(first, n).data, n,
                             [&](std::size_t i) { return reduced_value(dtype, op, comm.size(), first + i); }),
                  "");
      }
    }
  }
}

TEST(MpiCommunicator, AllGatherOutOfPlaceAndInPlaceEveryDType) {
  MpiCommunicator comm(MPI_COMM_WORLD);
  const auto size = static_cast<std::size_t>(comm.size());
  for (DType dtype : kCollectiveDTypes) {
    for (std::size_t n : kCounts) {
      for (bool in_place : {false, true}) {
        SCOPED_TRACE(describe(dtype, ReduceOp::sum, n) + (in_place ? " in place" : " out of place"));
        std::vector<std::byte> recv(size * n * dtype_size(dtype), std::byte{0x5a});
        const Tensor gathered = host_view(recv, dtype);
        const std::size_t first = static_cast<std::size_t>(comm.rank()) * n;
        auto send = make_input(dtype, comm.rank(), n);
        if (in_place) {
          std::memcpy(gathered.slice(first, n).data, send.data(), send.size());
          comm.all_gather(gathered.slice(first, n), gathered);
        } else {
          comm.all_gather(host_view(send, dtype), gathered);
        }
        EXPECT_EQ(mismatches(dtype, recv.data(), size * n,
                             [&](std::size_t i) { return input_value(dtype, static_cast<int>(i / n), i % n); }),
                  "");
      }
    }
  }
}

TEST(MpiCommunicator, BroadcastFromEveryRoot) {
  MpiCommunicator comm(MPI_COMM_WORLD);
  for (DType dtype : kCollectiveDTypes) {
    for (int root = 0; root < comm.size(); ++root) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " root " + std::to_string(root));
      constexpr std::size_t n = 13;
      auto data = make_input(dtype, comm.rank(), n);
      comm.broadcast(host_view(data, dtype), root);
      EXPECT_EQ(mismatches(dtype, data.data(), n, [&](std::size_t i) { return input_value(dtype, root, i); }), "");
    }
  }
}

// Ranks 0 and 1 hold [1 + u, 1, 1] and [u/2, u/2, 3u/4] (u = ulp of 1), all
// others zeros: whatever the order of combination, exactly one sum is inexact.
// Round to nearest even gives [1 + 2u, 1, 1 + u]; truncation would give [1 + u, 1, 1].
void expect_16bit_sum_rounds_to_nearest_even(DType dtype, double ulp) {
  SCOPED_TRACE(std::string(dtype_name(dtype)));
  MpiCommunicator comm(MPI_COMM_WORLD);
  std::vector<std::byte> data(3 * dtype_size(dtype));
  const double rank0[] = {1 + ulp, 1, 1};
  const double rank1[] = {ulp / 2, ulp / 2, 0.75 * ulp};
  for (std::size_t i = 0; i < 3; ++i) {
    const double value = comm.rank() == 0 ? rank0[i] : comm.rank() == 1 ? rank1[i] : 0.0;
    testing::store_value(dtype, data.data(), i, value);
    EXPECT_EQ(load_value(dtype, data.data(), i), value) << "test input not representable";
  }
  comm.all_reduce(host_view(data, dtype), ReduceOp::sum);
  if (comm.size() == 1) {
    for (std::size_t i = 0; i < 3; ++i) EXPECT_EQ(load_value(dtype, data.data(), i), rank0[i]);
    return;
  }
  EXPECT_EQ(load_value(dtype, data.data(), 0), 1 + 2 * ulp);
  EXPECT_EQ(load_value(dtype, data.data(), 1), 1.0);
  EXPECT_EQ(load_value(dtype, data.data(), 2), 1 + ulp);
}

TEST(MpiCommunicator, SixteenBitSumsRoundToNearestEven) {
  expect_16bit_sum_rounds_to_nearest_even(DType::bf16, std::ldexp(1.0, -7));
  expect_16bit_sum_rounds_to_nearest_even(DType::f16, std::ldexp(1.0, -10));
}

// Inexact sums of many values: the result must be the same bits on every rank
// and in a repeated run, and close to the exact sum.
TEST(MpiCommunicator, LargeFloatAllReduceIsBitwiseReproducible) {
  MpiCommunicator comm(MPI_COMM_WORLD);
  constexpr std::size_t n = 262147;
  for (DType dtype : {DType::f32, DType::bf16, DType::f16}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    std::vector<std::byte> first(n * dtype_size(dtype));
    for (std::size_t i = 0; i < n; ++i) {
      testing::store_value(dtype, first.data(), i, std::sin(0.37 * static_cast<double>(i) + comm.rank()));
    }
    auto second = first;
    comm.all_reduce(host_view(first, dtype), ReduceOp::sum);
    comm.all_reduce(host_view(second, dtype), ReduceOp::sum);
    EXPECT_EQ(first, second) << "two identical all-reduces gave different bits";
    expect_identical_on_all_ranks(first);
    const double tolerance = dtype == DType::f32 ? 1e-5 : dtype == DType::f16 ? 1e-2 : 6e-2;
    std::size_t outside_tolerance = 0;
    for (std::size_t i = 0; i < n; i += 101) {
      double exact = 0;
      alignas(8) std::byte rounded_input[8];
      for (int r = 0; r < comm.size(); ++r) {  // the inputs as the dtype held them
        testing::store_value(dtype, rounded_input, 0, std::sin(0.37 * static_cast<double>(i) + r));
        exact += load_value(dtype, rounded_input, 0);
      }
      if (std::abs(load_value(dtype, first.data(), i) - exact) > tolerance) ++outside_tolerance;
    }
    EXPECT_EQ(outside_tolerance, 0u) << "elements farther than " << tolerance << " from the exact sum";
  }
}

TEST(MpiCommunicator, AsyncHandlesCanBeWaitedInAnyOrder) {
  MpiCommunicator comm(MPI_COMM_WORLD);
  const auto size = static_cast<std::size_t>(comm.size());
  const std::size_t first = static_cast<std::size_t>(comm.rank()) * 5;
  auto reduced = make_input(DType::f32, comm.rank(), 9);
  auto scatter_send = make_input(DType::bf16, comm.rank(), size * 5);
  std::vector<std::byte> scatter_recv(5 * 2);
  auto gather_send = make_input(DType::i64, comm.rank(), 3);
  std::vector<std::byte> gathered(size * 3 * 8);
  auto broadcasted = make_input(DType::u8, comm.rank(), 11);
  auto dropped = make_input(DType::i32, comm.rank(), 4);

  CommHandle reduce_handle = comm.all_reduce_async(host_view(reduced, DType::f32), ReduceOp::max);
  CommHandle scatter_handle = comm.reduce_scatter_async(host_view(scatter_send, DType::bf16),
                                                        host_view(scatter_recv, DType::bf16), ReduceOp::avg);
  CommHandle gather_handle = comm.all_gather_async(host_view(gather_send, DType::i64), host_view(gathered, DType::i64));
  CommHandle broadcast_handle = comm.broadcast_async(host_view(broadcasted, DType::u8), comm.size() - 1);
  // Destroying a handle without wait() completes the collective.
  { CommHandle ignored = comm.all_reduce_async(host_view(dropped, DType::i32), ReduceOp::sum); }
  EXPECT_TRUE(reduce_handle.pending());

  broadcast_handle.wait(Stream());
  gather_handle.wait(Stream());
  scatter_handle.wait(Stream());
  reduce_handle.wait(Stream());
  EXPECT_FALSE(reduce_handle.pending());

  EXPECT_EQ(mismatches(DType::f32, reduced.data(), 9,
                       [&](std::size_t i) { return reduced_value(DType::f32, ReduceOp::max, comm.size(), i); }),
            "");
  EXPECT_EQ(
      mismatches(DType::bf16, scatter_recv.data(), 5,
                 [&](std::size_t i) { return reduced_value(DType::bf16, ReduceOp::avg, comm.size(), first + i); }),
      "");
  EXPECT_EQ(mismatches(DType::i64, gathered.data(), size * 3,
                       [&](std::size_t i) { return input_value(DType::i64, static_cast<int>(i / 3), i % 3); }),
            "");
  EXPECT_EQ(mismatches(DType::u8, broadcasted.data(), 11,
                       [&](std::size_t i) { return input_value(DType::u8, comm.size() - 1, i); }),
            "");
  EXPECT_EQ(mismatches(DType::i32, dropped.data(), 4,
                       [&](std::size_t i) { return reduced_value(DType::i32, ReduceOp::sum, comm.size(), i); }),
            "");
}

TEST(MpiCommunicator, SplitAndMoveKeepWorking) {
  MpiCommunicator world(MPI_COMM_WORLD);
  // Even and odd world ranks form two groups.
  MpiCommunicator parity = world.split(world.rank() % 2, world.rank());
  MpiCommunicator moved(std::move(parity));
  EXPECT_EQ(moved.rank(), world.rank() / 2);
  EXPECT_EQ(moved.size(), (world.size() - world.rank() % 2 + 1) / 2);
  std::int32_t value = world.rank();
  moved.all_reduce(Tensor::flat(&value, DType::i32, Device::cpu(), 1), ReduceOp::sum);
  std::int32_t expected = 0;
  for (int r = world.rank() % 2; r < world.size(); r += 2) expected += r;
  EXPECT_EQ(value, expected);
}

// Ranks other than 0 leave a file before the barrier; after it, rank 0 must see all of them.
TEST(MpiCommunicator, BarrierWaitsForEveryRank) {
  MpiCommunicator comm(MPI_COMM_WORLD);
  std::int64_t run_id = comm.rank() == 0 ? static_cast<std::int64_t>(::getpid()) : 0;
  comm.broadcast(Tensor::flat(&run_id, DType::i64, Device::cpu(), 1), 0);
  const auto folder = std::filesystem::temp_directory_path() / ("adamant-barrier-" + std::to_string(run_id));
  if (comm.rank() == 0) std::filesystem::create_directories(folder);
  comm.barrier();
  if (comm.rank() != 0) std::ofstream(folder / std::to_string(comm.rank())) << "here";
  comm.barrier();
  if (comm.rank() == 0) {
    for (int r = 1; r < comm.size(); ++r) EXPECT_TRUE(std::filesystem::exists(folder / std::to_string(r))) << r;
  }
  comm.barrier();
  if (comm.rank() == 0) std::filesystem::remove_all(folder);
}

TEST(MpiCommunicator, RejectsInvalidArgumentsWithClearErrors) {
  MpiCommunicator comm(MPI_COMM_WORLD);
  const auto size = static_cast<std::size_t>(comm.size());
  std::vector<float> host(4 * size + 4);
  const Tensor whole = Tensor::flat(host.data(), DType::f32, Device::cpu(), host.size());
  const Tensor on_gpu = Tensor::flat(host.data(), DType::f32, Device::cuda(0), 4);
  const auto expect_error = [](auto&& call, const std::string& needle) {
    try {
      call();
      ADD_FAILURE() << "no error; expected one mentioning '" << needle << "'";
    } catch (const Error& error) {
      EXPECT_NE(std::string(error.what()).find(needle), std::string::npos) << error.what();
    }
  };
  expect_error([&] { comm.all_reduce(on_gpu, ReduceOp::sum); }, "host memory");
  expect_error([&] { comm.reduce_scatter(whole.slice(0, 4 * size + 1), whole.slice(0, 4), ReduceOp::sum); },
               "must have size()");
  expect_error([&] { comm.all_gather(whole.slice(0, 4), whole.slice(0, 4 * size + 1)); }, "must have size()");
  if (comm.size() > 1) {  // recv overlapping send, but not this rank's block
    const std::size_t other = comm.rank() == 0 ? 1 : 0;
    expect_error([&] { comm.reduce_scatter(whole.slice(0, 4 * size), whole.slice(other * 4 + 1, 4), ReduceOp::sum); },
                 "overlaps");
  }
  std::vector<std::int32_t> integers(4);
  expect_error([&] { comm.all_reduce(Tensor::flat(integers.data(), DType::i32, Device::cpu(), 4), ReduceOp::avg); },
               "avg of int32");
  expect_error([&] { comm.broadcast(whole.slice(0, 4), comm.size()); }, "root");
  std::vector<std::uint16_t> halves(4 * size);
  expect_error(
      [&] {
        comm.reduce_scatter(whole.slice(0, 4 * size), Tensor::flat(halves.data(), DType::bf16, Device::cpu(), 4),
                            ReduceOp::sum);
      },
      "same dtype");
}

}  // namespace
}  // namespace adamant::comm
