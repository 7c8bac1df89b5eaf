// Exposed communication time on GPU buffers with NCCL (2 ranks, one GPU each): the
// events around the compute stream's waits are CUDA events there, read without
// blocking once the step's grad-norm read has synchronised the stream. A rank made
// 200 ms late shows up as at least 150 ms of idle compute stream on the other.
// ADAMANT_OPTIM_TEST_DEVICE=cpu runs the same test on host buffers with MPI.
#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <cmath>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "adamant/comm/mpi_communicator.h"
#include "adamant/comm/process_grid.h"
#include "cuda_backend_run.h"
#include "mpi_test_helpers.h"

namespace adamant::optim::testing {
namespace {

constexpr auto kDelay = std::chrono::milliseconds(200);
constexpr double kMinimumSeenMs = 150.0;

struct Case {
  const char* optimizer;
  bool overlap_param_sync;
};

class LateRankOnDevice : public ::testing::TestWithParam<Case> {};

TEST_P(LateRankOnDevice, ShowsAsExposedCommunicationOnTheOtherRank) {
  comm::MpiCommunicator host;
  ASSERT_EQ(host.size(), 2) << "run under mpirun -np 2";
  const Device device = device_under_test();
  const std::unique_ptr<comm::Communicator> device_comm = comm::make_device_communicator(host, device);
  OptimizerOptions options = test_options(GetParam().optimizer);
  options.overlap_param_sync = GetParam().overlap_param_sync;
  const ParamList params = synthetic_params();
  BackendRun run(options, params, *device_comm, device);
  BackendRun* runs[] = {&run};
  const int late_rank = 1;
  std::vector<double> exposed;
  for (std::int64_t step = 0; step < 2; ++step) {
    const auto grads = rank_gradients(params, run.weight_bits(), step, host.rank(), 2, 1);
    if (step == 1 && host.rank() == late_rank) std::this_thread::sleep_for(kDelay);
    const auto results = step_together(runs, params, grads, 1e-3, 0.5);
    ASSERT_FALSE(results[0].skipped);
    exposed.push_back(run.optimizer().take_exposed_comm_ms());  // step() read the grad norm: the stream is synced
    EXPECT_TRUE(std::isfinite(exposed.back()) && exposed.back() >= 0.0) << exposed.back();
  }
  double late_ms = exposed[1];
  MPI_Bcast(&late_ms, 1, MPI_DOUBLE, late_rank, MPI_COMM_WORLD);
  if (host.rank() != late_rank) {
    EXPECT_GE(exposed[1], kMinimumSeenMs) << "rank " << host.rank() << " waited for the late rank";
    EXPECT_LT(late_ms, exposed[1] - 100.0) << "the late rank itself hardly waits";
  }
  run.weight_bits();  // every parameter sync done before the communicator goes
}

INSTANTIATE_TEST_SUITE_P(Optimizers, LateRankOnDevice,
                         ::testing::Values(Case{"distributed_fused_adam", true}, Case{"distributed_fused_adam", false},
                                           Case{"fused_adam", false}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return std::string(info.param.optimizer) +
                                  (info.param.overlap_param_sync ? "_overlap_param_sync" : "");
                         });

}  // namespace
}  // namespace adamant::optim::testing
