// GoogleTest main for tests run under mpirun: MPI is initialised once, every
// rank runs every test, and only rank 0 prints the report. A GPU test that needs one
// GPU per rank (ADAMANT_TEST_GPUS set by adamant_gpu_test) exits with kSkipExitCode,
// which ctest reports as skipped, on a machine with fewer GPUs.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <optional>

#include "adamant/core/device.h"
#include "adamant/core/number_text.h"

namespace {

constexpr int kSkipExitCode = 77;  // SKIP_RETURN_CODE of the gpu tests (cmake/AdamantTesting.cmake)

bool too_few_gpus(int rank) {
  const char* needed_text = std::getenv("ADAMANT_TEST_GPUS");
  if (needed_text == nullptr) return false;
  const std::optional<int> read = adamant::number_from_text<int>(needed_text);
  if (!read || *read < 0) {
    // Set by adamant_gpu_test (cmake/AdamantTesting.cmake): a bad value is a build or
    // environment mistake, not a reason to run or to skip.
    std::fprintf(stderr, "ADAMANT_TEST_GPUS=%s: use a whole number of GPUs (0 or more)\n", needed_text);
    std::exit(EXIT_FAILURE);
  }
  const int needed = *read;
  if (needed == 0) return false;
  const int available = adamant::cuda_device_count();
  if (available >= needed) return false;
  if (rank == 0) {
    std::printf("SKIPPED: this test runs one rank per GPU and needs %d GPUs; this machine has %d\n", needed, available);
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  ::testing::InitGoogleTest(&argc, argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  if (too_few_gpus(rank)) {
    MPI_Finalize();
    return kSkipExitCode;
  }
  int failed = RUN_ALL_TESTS();
  // A test fails if it failed on any rank.
  int any_failed = 0;
  MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return any_failed;
}
