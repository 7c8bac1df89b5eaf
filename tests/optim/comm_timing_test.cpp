// Exposed communication time (Optimizer::take_exposed_comm_ms) under mpirun: a
// rank made late by a known delay shows up as at least that much idle time in
// the waits of the ranks that were on time.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>
#include <vector>

#include "adamant/comm/mpi_communicator.h"
#include "adamant/optim/comm_wait_timer.h"
#include "mpi_test_helpers.h"

namespace adamant::optim::testing {
namespace {

constexpr auto kDelay = std::chrono::milliseconds(200);
constexpr double kMinimumSeenMs = 150.0;  // the delay less scheduling noise on a loaded machine

TEST(CommWaitTimer, SumsTheTimedWaitsOnceEach) {
  const Stream cpu;
  CommWaitTimer timer;
  EXPECT_EQ(timer.take_done_ms(), 0.0);
  timer.time(cpu, [] { std::this_thread::sleep_for(std::chrono::milliseconds(20)); });
  timer.time(cpu, [] { std::this_thread::sleep_for(std::chrono::milliseconds(30)); });
  const double both = timer.take_done_ms();
  EXPECT_GE(both, 50.0);
  EXPECT_LT(both, 50.0 + 5000.0);
  EXPECT_EQ(timer.take_done_ms(), 0.0);  // read once
  timer.time(cpu, [] {});
  const double nothing = timer.take_done_ms();
  EXPECT_GE(nothing, 0.0);
  EXPECT_LT(nothing, 20.0);  // an instant wait costs no idle time
}

class LateRank : public ::testing::TestWithParam<const char*> {};

TEST_P(LateRank, ShowsAsExposedCommunicationOnTheOtherRanks) {
  comm::MpiCommunicator world(MPI_COMM_WORLD);
  if (world.size() < 2) GTEST_SKIP() << "needs 2 or more ranks";
  const int late_rank = world.size() - 1;
  Trained t(test_options(GetParam()), synthetic_params(), &world);
  t.run(RunConfig{});  // one step on time: buckets, events and MPI connections are set up
  const double on_time_ms = t.optimizer->take_exposed_comm_ms();
  EXPECT_TRUE(std::isfinite(on_time_ms) && on_time_ms >= 0.0) << on_time_ms;

  RunConfig late;
  late.first_step = 1;
  late.before_last_micro_batch = [&](std::int64_t, SyntheticModel&) {
    if (world.rank() == late_rank) std::this_thread::sleep_for(kDelay);
  };
  t.run(late);
  const double ms = t.optimizer->take_exposed_comm_ms();
  EXPECT_TRUE(std::isfinite(ms) && ms >= 0.0) << ms;

  // Every rank's figure on every rank: the late one waited for nobody, the others for it.
  std::vector<double> all(static_cast<std::size_t>(world.size()));
  MPI_Allgather(&ms, 1, MPI_DOUBLE, all.data(), 1, MPI_DOUBLE, MPI_COMM_WORLD);
  const double late_ms = all[static_cast<std::size_t>(late_rank)];
  for (int r = 0; r < late_rank; ++r) {
    EXPECT_GE(all[static_cast<std::size_t>(r)], kMinimumSeenMs) << "rank " << r << " waited for the late rank";
    EXPECT_LT(late_ms, all[static_cast<std::size_t>(r)] - 100.0) << "the late rank itself hardly waits";
  }
}

INSTANTIATE_TEST_SUITE_P(Optimizers, LateRank, ::testing::Values("distributed_fused_adam", "fused_adam"));

}  // namespace
}  // namespace adamant::optim::testing
