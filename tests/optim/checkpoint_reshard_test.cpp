// Optimizer checkpoints across layouts: 10 steps on the world's ranks, save,
// then continue on the same ranks, on sub-groups of every smaller size (other
// bucket size too), from fused_adam into distributed_fused_adam and back. Every
// continuation is compared with a run that never stopped.
//
// The global batch is 24 micro-batches, so every group size that divides it
// (1, 2, 3, 4, 6, 8) trains on the same samples; other sizes are skipped. Resuming on the layout that saved is
// bitwise equal to not stopping (save and load are exact); other group sizes sum
// the micro-batch gradients in another order, which changes fp32 gradients in
// the last bit: tolerance as in distributed_fused_adam_test.cpp.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstring>

#include "adamant/comm/mpi_communicator.h"
#include "mpi_test_helpers.h"

namespace adamant::optim::testing {
namespace {

constexpr int kGlobalBatch = 24;
constexpr double kMainTolerance = 1e-5;
constexpr double kWeightTolerance = 1.0 / 256;  // one bf16 ulp below 1

RunConfig steps(std::int64_t first, int count, int dp) {
  RunConfig config;
  config.first_step = first;
  config.steps = count;
  config.micro_batches_per_rank = kGlobalBatch / dp;
  return config;
}

std::vector<float> parameter_weights(const Trained& t) {
  std::vector<float> w = t.model->weights_f32();
  w.resize(t.model->params().total_numel);
  return w;
}

void zero_model_weights(Trained& t) { std::memset(t.model->weights().data, 0, t.model->weights().bytes()); }

void expect_close(const Trained& a, const Trained& b, const std::string& what) {
  EXPECT_LE(max_abs_difference(parameter_weights(a), parameter_weights(b)), kWeightTolerance) << what;
}

TEST(OptimizerCheckpoint, ReshardsToEveryGroupSize) {
  comm::MpiCommunicator world;
  const int dp = world.size();
  const ParamList params = synthetic_params();
  const OptimizerOptions options = test_options("distributed_fused_adam");

  Trained original(options, params, &world);
  original.run(steps(0, 10, dp));
  const std::vector<float> weights_at_10 = parameter_weights(original);
  const auto dir = shared_temp_dir("optim-reshard");
  original.save(dir / "step10");
  original.run(steps(10, 5, dp));  // the run that never stopped
  const FlatState uninterrupted = read_flat_state(original.save(dir / "step15"), params);

  for (int group = 1; group <= dp; ++group) {
    if (kGlobalBatch % group != 0) continue;  // the same on every rank
    const bool member = world.rank() < group;
    comm::MpiCommunicator sub = world.split(member ? 0 : 1, world.rank());
    const auto check_dir = shared_temp_dir("optim-reshard-check");  // collective over the world
    for (const double bucket_cap_mb : {0.002, 0.0031}) {
      if (!member) break;
      SCOPED_TRACE(::testing::Message() << "saved on " << dp << " ranks, loaded on " << group << " with buckets of "
                                        << bucket_cap_mb << " MiB");
      OptimizerOptions resumed_options = options;
      resumed_options.bucket_cap_mb = bucket_cap_mb;
      Trained resumed(resumed_options, params, &sub);
      zero_model_weights(resumed);
      resumed.optimizer->load(dir / "step10");
      EXPECT_EQ(resumed.optimizer->step_count(), 10);
      // load() rebuilds the model weights from the main weights exactly as the optimizer rounded them.
      expect_bitwise_equal(parameter_weights(resumed), weights_at_10, "model weights after load");
      resumed.run(steps(10, 5, group));
      // Its state, read back from a new checkpoint, matches the uninterrupted run's state.
      const FlatState state = read_flat_state(resumed.save(check_dir / std::to_string(bucket_cap_mb)), params);
      if (group == dp && bucket_cap_mb == options.bucket_cap_mb) {
        expect_bitwise_equal(parameter_weights(resumed), parameter_weights(original),
                             "resumed on the saving layout vs uninterrupted");
        expect_bitwise_equal(state.main, uninterrupted.main, "main weights");
        expect_bitwise_equal(state.exp_avg, uninterrupted.exp_avg, "exp_avg");
        expect_bitwise_equal(state.exp_avg_sq, uninterrupted.exp_avg_sq, "exp_avg_sq");
      } else {
        expect_close(resumed, original, "resumed on another layout vs uninterrupted");
        EXPECT_LE(max_abs_difference(state.main, uninterrupted.main), kMainTolerance);
      }
    }
    remove_shared_dir(check_dir);  // collective over the world
  }
  remove_shared_dir(dir);
}

TEST(OptimizerCheckpoint, FusedAdamToDistributedAndBack) {
  comm::MpiCommunicator world;
  const int dp = world.size();
  const ParamList params = synthetic_params();
  const auto dir = shared_temp_dir("optim-fused-dfa");

  // Reference: fused_adam on one rank, 20 steps without stopping (every rank runs it locally).
  Trained reference(test_options("fused_adam"), params, nullptr);
  reference.run(steps(0, 10, 1));
  if (world.rank() == 0) reference.save(dir / "fused10");
  MPI_Barrier(MPI_COMM_WORLD);
  reference.run(steps(10, 10, 1));

  // fused_adam checkpoint -> distributed_fused_adam on every rank of the world.
  Trained distributed(test_options("distributed_fused_adam"), params, &world);
  zero_model_weights(distributed);
  distributed.optimizer->load(dir / "fused10");
  EXPECT_EQ(distributed.optimizer->step_count(), 10);
  distributed.run(steps(10, 5, dp));
  distributed.save(dir / "dfa15");

  // ... and back: every rank resumes fused_adam alone from the sharded checkpoint.
  Trained back(test_options("fused_adam"), params, nullptr);
  zero_model_weights(back);
  back.optimizer->load(dir / "dfa15");
  EXPECT_EQ(back.optimizer->step_count(), 15);
  expect_bitwise_equal(parameter_weights(back), parameter_weights(distributed), "fused_adam loaded from dfa");
  back.run(steps(15, 5, 1));
  distributed.run(steps(15, 5, dp));
  if (dp == 1) {  // one rank sums the 12 micro-batches in the same order as the reference
    expect_bitwise_equal(parameter_weights(back), parameter_weights(reference), "dfa round trip on one rank");
  }
  expect_close(back, reference, "fused -> dfa -> fused vs uninterrupted fused_adam");
  expect_close(distributed, reference, "fused -> dfa vs uninterrupted fused_adam");
  remove_shared_dir(dir);
}

TEST(OptimizerCheckpoint, RejectsAnotherModel) {
  comm::MpiCommunicator world;
  const ParamList params = synthetic_params();
  const auto dir = shared_temp_dir("optim-other-model");
  Trained trained(test_options("distributed_fused_adam"), params, &world);
  trained.run(steps(0, 1, world.size()));
  trained.save(dir);
  ParamList other = params;
  other.params[3].shape = {13, 47};  // same numel (611), another shape
  Trained wrong(test_options("distributed_fused_adam"), other, &world);
  try {
    wrong.optimizer->load(dir);
    ADD_FAILURE() << "loaded a checkpoint of another model";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("was written for another model"), std::string::npos) << message;
    EXPECT_NE(message.find("decoder.attention.qkv.weight"), std::string::npos) << message;
    EXPECT_NE(message.find("[611]"), std::string::npos) << message;
    EXPECT_NE(message.find("[13, 47]"), std::string::npos) << message;
  }
  try {
    wrong.optimizer->load(dir / "missing");
    ADD_FAILURE() << "loaded from a folder without checkpoint";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("optim_rank_0.adm"), std::string::npos) << e.what();
  }
  remove_shared_dir(dir);
}

}  // namespace
}  // namespace adamant::optim::testing
