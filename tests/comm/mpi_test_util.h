#pragma once
// Helpers for tests run under mpirun on host memory.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstddef>
#include <cstring>
#include <vector>

#include "adamant/core/tensor.h"
#include "support/mpi_world.h"

namespace adamant::comm::testing {

using adamant::testing::world_rank;
using adamant::testing::world_size;

inline Tensor host_view(std::vector<std::byte>& bytes, DType dtype) {
  return Tensor::flat(bytes.data(), dtype, Device::cpu(), bytes.size() / dtype_size(dtype));
}

// Fails on every rank whose bytes differ from rank 0's (over MPI_COMM_WORLD, not
// through the code under test).
inline void expect_identical_on_all_ranks(const std::vector<std::byte>& bytes) {
  std::vector<std::byte> rank0 = bytes;
  MPI_Bcast(rank0.data(), static_cast<int>(rank0.size()), MPI_BYTE, 0, MPI_COMM_WORLD);
  EXPECT_EQ(std::memcmp(rank0.data(), bytes.data(), bytes.size()), 0)
      << "rank " << world_rank() << " holds a result that differs bitwise from rank 0's";
}

}  // namespace adamant::comm::testing
