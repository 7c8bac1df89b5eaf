// DistributedFusedAdam on 1..4 MPI ranks against FusedAdam on one rank that
// computes every micro-batch of the same global batch (run inside each rank on a
// single-process communicator).
//
// Bitwise expectations: with one rank (both sum the same micro-batches in the
// same order) and with two ranks of one micro-batch each (the reduce-scatter sums
// exactly two values, and a + b == b + a) every fp32 gradient the Adam kernel
// sees is identical, so are all weights and states. With 3 or 4 ranks MPI may add
// the ranks' gradients in another order than the reference's sequential sum; the
// gradients then differ in the last fp32 bit, which moves the fp32 main weights
// by far less than kMainTolerance and may flip a bf16 weight by one ulp.
#include "adamant/optim/distributed_fused_adam.h"

#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>
#include <limits>

#include "adamant/comm/mpi_communicator.h"
#include "adamant/core/half.h"
#include "adamant/optim/bucket_plan.h"
#include "deferred_communicator.h"
#include "mpi_test_helpers.h"

namespace adamant::optim::testing {
namespace {

// Reordered fp32 sums over 8 steps at lr <= 1e-2 (see the top of the file), measured < 1e-6.
constexpr double kMainTolerance = 1e-5;
// A bf16 weight may round the other way once its fp32 main weight moved: one bf16 ulp at |w| < 1 is 2^-8.
constexpr double kWeightTolerance = 1.0 / 256;

struct Snapshot {
  std::vector<float> weights;  // the model weights as fp32, parameters only (padding layouts differ)
  FlatState state;             // from the checkpoint: main weights, exp_avg, exp_avg_sq per parameter
};

// Collective when the optimizer is distributed; `dir` must then be the same on every rank.
Snapshot snapshot(const Trained& t, const std::filesystem::path& dir) {
  t.save(dir);
  Snapshot s{t.model->weights_f32(), read_flat_state(dir, t.model->params())};
  s.weights.resize(t.model->params().total_numel);
  return s;
}

void expect_same_run(const Snapshot& a, const Snapshot& b, bool bitwise, const std::string& what) {
  if (bitwise) {
    expect_bitwise_equal(a.weights, b.weights, what + ": model weights");
    expect_bitwise_equal(a.state.main, b.state.main, what + ": main weights");
    expect_bitwise_equal(a.state.exp_avg, b.state.exp_avg, what + ": exp_avg");
    expect_bitwise_equal(a.state.exp_avg_sq, b.state.exp_avg_sq, what + ": exp_avg_sq");
    return;
  }
  EXPECT_LE(max_abs_difference(a.state.main, b.state.main), kMainTolerance) << what;
  EXPECT_LE(max_abs_difference(a.weights, b.weights), kWeightTolerance) << what;
}

// A folder of this rank's own inside a shared one (for single-rank reference runs); removed with it.
std::filesystem::path private_subdir(const std::filesystem::path& shared) {
  return shared / ("reference_rank_" + std::to_string(world_rank()));
}

// fused_adam on one rank taking, at each step, the micro-batches of all `dp` ranks of `config` in rank order:
// the run a data-parallel run of `dp` ranks must match.
Trained one_rank_reference(const OptimizerOptions& options, const ParamList& params, RunConfig config, int dp) {
  config.micro_batches_per_rank *= dp;
  Trained reference(options, params, nullptr);
  reference.run(config);
  return reference;
}

void report(const char* format, double value, int dp) {
  if (world_rank() == 0) std::printf(format, dp, value);
}

struct Overlap {
  bool grad_sync;
  bool param_sync;
  bool deferred;  // collectives run only when waited for: a missing wait gives wrong weights
};

class MatchesFusedAdam : public ::testing::TestWithParam<Overlap> {};

TEST_P(MatchesFusedAdam, OnEveryDataParallelSize) {
  comm::MpiCommunicator mpi;
  DeferredCommunicator deferred(mpi);
  comm::Communicator& world = GetParam().deferred ? static_cast<comm::Communicator&>(deferred) : mpi;
  const int dp = world.size();
  const ParamList params = synthetic_params();
  OptimizerOptions options = test_options("distributed_fused_adam");
  options.overlap_grad_sync = GetParam().grad_sync;
  options.overlap_param_sync = GetParam().param_sync;
  RunConfig config;
  config.steps = 8;
  config.micro_batches_per_rank = dp == 1 ? 2 : 1;
  Trained dfa(options, params, &world);
  dfa.run(config);

  const Trained reference = one_rank_reference(test_options("fused_adam"), params, config, dp);

  const bool bitwise = dp <= 2;
  for (std::size_t s = 0; s < dfa.results.size(); ++s) {
    EXPECT_FALSE(dfa.results[s].skipped);
    EXPECT_NEAR(dfa.results[s].grad_norm, reference.results[s].grad_norm, 1e-6 * reference.results[s].grad_norm);
  }
  const auto dir = shared_temp_dir("dfa-vs-fused");
  const Snapshot a = snapshot(dfa, dir / "dfa");
  const Snapshot b = snapshot(reference, private_subdir(dir));
  expect_same_run(a, b, bitwise, "distributed_fused_adam vs fused_adam");
  report("dp=%d: max |main weight difference| to fused_adam = %.3g\n", max_abs_difference(a.state.main, b.state.main),
         dp);
  // The padding of the model weights stays zero.
  for (std::size_t i = params.total_numel; i < dfa.optimizer->padded_numel(); ++i) {
    ASSERT_EQ(dfa.model->weight(i), 0.0f) << i;
  }
  remove_shared_dir(dir);
}

INSTANTIATE_TEST_SUITE_P(Overlaps, MatchesFusedAdam,
                         ::testing::Values(Overlap{true, true, false}, Overlap{false, false, false},
                                           Overlap{true, false, false}, Overlap{true, true, true},
                                           Overlap{false, false, true}),
                         [](const auto& info) {
                           return std::string(info.param.grad_sync ? "OverlapGrad" : "NoOverlapGrad") +
                                  (info.param.param_sync ? "OverlapParam" : "NoOverlapParam") +
                                  (info.param.deferred ? "Deferred" : "");
                         });

// overlap_param_sync over several ranks: the next forward waits for each bucket's all-gather right
// before it reads the bucket's first weight (wait_for_param), and the all-gathers of the buckets it
// has not reached yet go on. With the deferred communicator those have not run at all: the other
// ranks' shards of every other bucket still hold the weights from before the step.
TEST(DistributedFusedAdam, WaitingForOneParameterWaitsForItsBucketsOnly) {
  comm::MpiCommunicator mpi;
  const int dp = mpi.size();
  if (dp < 2) GTEST_SKIP() << "one rank gathers nothing: there is nothing to wait for";
  DeferredCommunicator deferred(mpi);
  const ParamList params = synthetic_params();
  OptimizerOptions options = test_options("distributed_fused_adam");
  options.overlap_param_sync = true;
  Trained overlapped(options, params, &deferred);
  options.overlap_param_sync = false;
  Trained reference(options, params, &mpi);
  ASSERT_TRUE(overlapped.optimizer->overlaps_param_sync());
  ASSERT_FALSE(reference.optimizer->overlaps_param_sync());
  const std::vector<float> before = overlapped.model->weights_f32();
  for (Trained* t : {&overlapped, &reference}) {  // one step of one micro-batch a rank, as run_steps takes it
    t->model->zero_grads();
    t->model->accumulate_micro_batch(world_rank(), 1.0f, t->optimizer.get());
    t->optimizer->step(1e-2, 1.0 / dp);
  }
  const std::vector<float> updated = reference.model->weights_f32();  // waited for at the end of its step

  const BucketPlan& plan = dynamic_cast<const DistributedFusedAdam&>(*overlapped.optimizer).plan();
  const std::size_t param = 0;  // the final layernorm's weight: in the first bucket, the forward's last
  const std::size_t first = plan.first_bucket(param), last = plan.last_bucket(param);
  ASSERT_LT(last + 1, plan.buckets().size()) << "the test model spans more buckets than the parameter's";
  overlapped.optimizer->wait_for_param(param);
  const std::vector<float> now = overlapped.model->weights_f32();
  std::size_t stale_elements = 0;
  for (std::size_t b = 0; b < plan.buckets().size(); ++b) {
    const Bucket& bucket = plan.buckets()[b];
    const bool waited = b >= first && b <= last;
    for (std::size_t i = bucket.offset; i < bucket.offset + bucket.numel; ++i) {
      const bool own_shard = (i - bucket.offset) / bucket.shard_numel == static_cast<std::size_t>(mpi.rank());
      if (waited || own_shard) {
        ASSERT_EQ(now[i], updated[i]) << "bucket " << b << ", element " << i << ": updated and gathered";
      } else {
        ASSERT_EQ(now[i], before[i]) << "bucket " << b << ", element " << i << ": its all-gather was waited for";
        stale_elements += before[i] != updated[i] ? 1 : 0;
      }
    }
  }
  EXPECT_GT(stale_elements, 0u) << "the step changed no weight of another rank's shard outside the waited buckets";
  overlapped.optimizer->wait_for_params();
  expect_bitwise_equal(overlapped.model->weights_f32(), updated, "every bucket waited for");
}

TEST(DistributedFusedAdam, FusedAdamWithAllReduceMatchesOneRank) {
  comm::MpiCommunicator world;
  const int dp = world.size();
  const ParamList params = synthetic_params();
  RunConfig config;
  config.steps = 6;
  config.micro_batches_per_rank = dp == 1 ? 2 : 1;
  Trained ddp(test_options("fused_adam"), params, &world);
  ddp.run(config);
  const Trained reference = one_rank_reference(test_options("fused_adam"), params, config, dp);
  const auto dir = shared_temp_dir("ddp");  // rank 0 writes the (replicated) state for all
  const Snapshot a = snapshot(ddp, dir);
  const Snapshot b = snapshot(reference, private_subdir(dir));
  expect_same_run(a, b, dp <= 2, "fused_adam with all-reduce vs one rank");
  remove_shared_dir(dir);
}

OptimizerOptions bf16_sync_options() {
  OptimizerOptions options = test_options("distributed_fused_adam");
  options.grad_sync_dtype = DType::bf16;
  return options;
}

double mean_abs_difference(const std::vector<float>& a, const std::vector<float>& b, std::size_t count) {
  double sum = 0;
  for (std::size_t i = 0; i < count; ++i) sum += std::abs(a[i] - b[i]);
  return sum / static_cast<double>(count);
}

TEST(DistributedFusedAdam, Bf16GradSyncStaysClose) {
  comm::MpiCommunicator world;
  const int dp = world.size();
  const ParamList params = synthetic_params();
  const OptimizerOptions options = bf16_sync_options();
  RunConfig config;
  config.steps = 8;
  config.micro_batches_per_rank = 2;
  Trained dfa(options, params, &world);
  dfa.run(config);
  const Trained reference = one_rank_reference(test_options("fused_adam"), params, config, dp);
  const auto dir = shared_temp_dir("dfa-bf16-sync");
  const Snapshot a = snapshot(dfa, dir);
  const Snapshot b = snapshot(reference, private_subdir(dir));
  // Each rank's gradient is rounded to bf16 (relative error 2^-9) and the sum is rounded again. For a typical
  // element Adam's update m/sqrt(v) moves by a similar relative amount, so the mean difference stays near
  // lr * 2^-8 per step (8 steps, lr <= 1e-2: < 3e-4). Where the ranks' gradients nearly cancel, the rounding can
  // flip the sign of the sum and the update (at most ~2 lr per step): the maximum is bounded by 2 * sum(lr) < 0.13
  // only, so it is asserted loosely.
  const double main_difference = max_abs_difference(a.state.main, b.state.main);
  const double mean_difference = mean_abs_difference(a.state.main, b.state.main, params.total_numel);
  EXPECT_LE(mean_difference, 3e-4);
  if (dp == 1) {
    EXPECT_EQ(mean_difference, 0.0) << "one rank sends nothing: its fp32 gradients, as fused_adam's";
  } else {
    EXPECT_GT(mean_difference, 0.0);  // the bf16 sync really was used
  }
  EXPECT_LE(main_difference, 0.13);
  report("dp=%d: bf16 grad sync, mean |main weight difference| to fused_adam = %.3g\n", mean_difference, dp);
  report("dp=%d: bf16 grad sync, max |main weight difference| to fused_adam = %.3g\n", main_difference, dp);
  remove_shared_dir(dir);
}

// A bf16 gradient buffer (a GPU model's with grad_sync_dtype bf16: model/gpt_config.h) is sent as it
// is. With one micro-batch per rank it holds the bf16 values an fp32 buffer is cast to before its bf16
// sync, so from two ranks on the run is the fp32 buffer's bit for bit; one rank sends nothing, and
// updates from the rounded gradients where an fp32 buffer keeps them unrounded.
TEST(DistributedFusedAdam, Bf16GradientBufferIsSentAsItIs) {
  comm::MpiCommunicator world;
  const int dp = world.size();
  const ParamList params = synthetic_params();
  const OptimizerOptions options = bf16_sync_options();
  RunConfig config;
  config.steps = 6;
  Trained f32_buffer(options, params, &world);
  Trained bf16_buffer(options, params, &world, DType::bf16);
  ASSERT_EQ(bf16_buffer.model->grads().dtype, DType::bf16);
  f32_buffer.run(config);
  bf16_buffer.run(config);
  const auto dir = shared_temp_dir("dfa-bf16-buffer");
  const Snapshot a = snapshot(bf16_buffer, dir / "bf16");
  const Snapshot b = snapshot(f32_buffer, dir / "f32");
  if (dp > 1) {
    expect_same_run(a, b, true, "bf16 against fp32 gradient buffer");
    for (std::size_t s = 0; s < f32_buffer.results.size(); ++s) {
      EXPECT_EQ(bf16_buffer.results[s].grad_norm, f32_buffer.results[s].grad_norm) << "step " << s;
    }
  } else {
    const double mean_difference = mean_abs_difference(a.state.main, b.state.main, params.total_numel);
    EXPECT_GT(mean_difference, 0.0) << "one rank's bf16 buffer held unrounded gradients";
    EXPECT_LE(mean_difference, 3e-4);  // as Bf16GradSyncStaysClose
  }
  remove_shared_dir(dir);
}

// Only distributed_fused_adam with bf16 sync takes a bf16 gradient buffer.
TEST(DistributedFusedAdam, Bf16GradientBufferNeedsBf16Sync) {
  comm::MpiCommunicator world;
  const ParamList params = synthetic_params();
  EXPECT_THROW(Trained(test_options("distributed_fused_adam"), params, &world, DType::bf16), Error);
  EXPECT_THROW(Trained(test_options("fused_adam"), params, nullptr, DType::bf16), Error);
}

TEST(DistributedFusedAdam, StoreParamRemaindersIsBitwiseEqual) {
  comm::MpiCommunicator world;
  const ParamList params = synthetic_params();
  OptimizerOptions with_remainders = test_options("distributed_fused_adam");
  with_remainders.store_param_remainders = true;
  RunConfig config;
  config.steps = 8;
  config.micro_batches_per_rank = 2;
  Trained remainders(with_remainders, params, &world);
  remainders.run(config);
  Trained plain(test_options("distributed_fused_adam"), params, &world);
  plain.run(config);
  // state_bytes: 2 bytes of remainder instead of 4 of fp32 per shard element.
  EXPECT_EQ(remainders.optimizer->state_bytes() + 2 * remainders.optimizer->state_bytes() / 10,
            plain.optimizer->state_bytes());
  const auto dir = shared_temp_dir("dfa-remainders");
  const Snapshot a = snapshot(remainders, dir / "remainders");  // main weights rebuilt from bf16 + remainder
  const Snapshot b = snapshot(plain, dir / "plain");
  expect_same_run(a, b, true, "store_param_remainders vs fp32 main weights");
  remove_shared_dir(dir);
}

// test_options with gradient clipping at 0.05, below the test model's grad norm at every step.
OptimizerOptions clipping_options(const char* name) {
  OptimizerOptions options = test_options(name);
  options.gradient_clip_val = 0.05;
  return options;
}

TEST(DistributedFusedAdam, ClippingUsesTheGlobalNorm) {
  comm::MpiCommunicator world;
  const int dp = world.size();
  const ParamList params = synthetic_params();
  const OptimizerOptions options = clipping_options("distributed_fused_adam");
  RunConfig config;
  config.steps = 1;
  config.micro_batches_per_rank = 2;
  Trained dfa(options, params, &world);
  const std::vector<float> w0 = dfa.model->weights_f32();
  dfa.run(config);

  // The averaged gradient of the 2 * dp samples of step 0 and its norm, by hand in double.
  const int samples = 2 * dp;
  std::vector<double> mean(params.total_numel, 0.0);
  double squared = 0;
  for (std::size_t i = 0; i < params.total_numel; ++i) {
    for (int s = 0; s < samples; ++s) mean[i] += SyntheticModel::sample_gradient(w0[i], s, i);
    mean[i] /= samples;
    squared += mean[i] * mean[i];
  }
  const double norm = std::sqrt(squared);
  ASSERT_GT(norm, 0.05);  // clipping is active
  EXPECT_NEAR(dfa.results[0].grad_norm, norm, 1e-6 * norm);
  // exp_avg after one step is (1 - beta1) * clipped gradient.
  const auto dir = shared_temp_dir("dfa-clip");
  const FlatState state = read_flat_state(dfa.save(dir), params);
  const double clip = 0.05 / (norm + 1e-6);
  const double one_minus_beta1 = 1.0 - static_cast<float>(options.beta1);
  for (std::size_t i = 0; i < params.total_numel; ++i) {
    ASSERT_NEAR(state.exp_avg[i], one_minus_beta1 * mean[i] * clip,
                1e-5 * std::abs(one_minus_beta1 * clip) * (std::abs(mean[i]) + 0.1))
        << i;
  }
  // Further steps agree with fused_adam clipping by its own norm (which may round differently: tolerance).
  config.first_step = 1;
  config.steps = 5;
  dfa.run(config);
  Trained reference(clipping_options("fused_adam"), params, nullptr);
  RunConfig reference_config = config;
  reference_config.first_step = 0;
  reference_config.steps = 6;
  reference_config.micro_batches_per_rank = samples;
  reference.run(reference_config);
  for (std::size_t s = 0; s < 6; ++s) EXPECT_GT(dfa.results[s].grad_norm, 0.05) << s;
  const Snapshot a = snapshot(dfa, dir / "after");
  const Snapshot b = snapshot(reference, private_subdir(dir));
  expect_same_run(a, b, false, "clipped distributed_fused_adam vs fused_adam");
  remove_shared_dir(dir);
}

// With clipping on the update depends on the global grad norm. Both optimizers sum the squares in
// fp64 (distributed_fused_adam through its buckets and over the ranks) and round once, to the fp32
// Adam scale, so at 1 and 2 ranks (the same fp32 gradients, see the top) the runs agree bit for bit.
TEST(DistributedFusedAdam, ClippedRunMatchesFusedAdamBitwiseUpToTwoRanks) {
  comm::MpiCommunicator world;
  const int dp = world.size();
  const ParamList params = synthetic_params();
  RunConfig config;
  config.steps = 8;
  config.micro_batches_per_rank = dp == 1 ? 2 : 1;
  Trained dfa(clipping_options("distributed_fused_adam"), params, &world);
  dfa.run(config);
  const Trained reference = one_rank_reference(clipping_options("fused_adam"), params, config, dp);
  for (std::size_t s = 0; s < dfa.results.size(); ++s) {
    ASSERT_GT(reference.results[s].grad_norm, 0.05) << "clipping must be active at step " << s;
    EXPECT_NEAR(dfa.results[s].grad_norm, reference.results[s].grad_norm,
                (dp <= 2 ? 1e-12 : 1e-6) * reference.results[s].grad_norm);
  }
  const auto dir = shared_temp_dir("dfa-clip-bitwise");
  const Snapshot a = snapshot(dfa, dir / "dfa");
  const Snapshot b = snapshot(reference, private_subdir(dir));
  expect_same_run(a, b, dp <= 2, "clipped distributed_fused_adam vs fused_adam");
  remove_shared_dir(dir);
}

TEST(DistributedFusedAdam, Fp16OverflowSkipsTheStepOnEveryRank) {
  comm::MpiCommunicator world;
  const int dp = world.size();
  const ParamList params = synthetic_params();
  const auto fp16_options = [](const char* name) {
    OptimizerOptions o = test_options(name, DType::f16);
    o.initial_loss_scale = 4096;
    o.loss_scale_growth_interval = 3;
    o.hysteresis = 2;
    return o;
  };
  // An inf in one gradient of the last rank at steps 1 and 2.
  RunConfig config;
  config.steps = 6;
  config.micro_batches_per_rank = 1;
  const int poisoned_rank = dp - 1;
  config.before_last_micro_batch = [&](std::int64_t step, SyntheticModel& model) {
    if ((step == 1 || step == 2) && world.rank() == poisoned_rank) {
      static_cast<float*>(model.grads().data)[params[3].offset + 5] = std::numeric_limits<float>::infinity();
    }
  };
  Trained dfa(fp16_options("distributed_fused_adam"), params, &world);
  EXPECT_EQ(dfa.optimizer->loss_scale(), 4096.0);
  std::vector<std::vector<float>> weights_after_step;
  for (int step = 0; step < 6; ++step) {
    RunConfig one = config;
    one.first_step = step;
    one.steps = 1;
    dfa.run(one);
    weights_after_step.push_back(dfa.model->weights_f32());
  }
  const std::vector<bool> skipped = {false, true, true, false, false, false};
  // Hysteresis 2: the first overflow only resets the growth count, the second halves the scale; three clean
  // steps (interval 3) double it again.
  const std::vector<double> scale = {4096, 4096, 2048, 2048, 2048, 4096};
  for (int step = 0; step < 6; ++step) {
    EXPECT_EQ(dfa.results[step].skipped, skipped[step]) << "step " << step;
    EXPECT_EQ(dfa.results[step].loss_scale, scale[step]) << "step " << step;
    EXPECT_EQ(std::isfinite(dfa.results[step].grad_norm), !skipped[step]) << "step " << step;
  }
  EXPECT_EQ(dfa.optimizer->step_count(), 4);
  expect_bitwise_equal(weights_after_step[0], weights_after_step[2], "weights across the skipped steps");
  // The same run on one rank (the inf goes into its only gradient buffer at the same steps).
  RunConfig reference_config = config;
  reference_config.micro_batches_per_rank = dp;
  reference_config.before_last_micro_batch = [&](std::int64_t step, SyntheticModel& model) {
    if (step == 1 || step == 2) {
      static_cast<float*>(model.grads().data)[params[3].offset + 5] = std::numeric_limits<float>::infinity();
    }
  };
  Trained reference(fp16_options("fused_adam"), params, nullptr);
  reference.run(reference_config);
  for (int step = 0; step < 6; ++step) {
    EXPECT_EQ(reference.results[step].skipped, skipped[step]);
    EXPECT_EQ(reference.results[step].loss_scale, scale[step]);
  }
  const auto dir = shared_temp_dir("dfa-fp16");
  const Snapshot a = snapshot(dfa, dir);
  const Snapshot b = snapshot(reference, private_subdir(dir));
  // fp16 weights: one fp16 ulp at |w| < 1 is 2^-11, within kWeightTolerance.
  expect_same_run(a, b, dp <= 2, "fp16 distributed_fused_adam vs fused_adam");
  remove_shared_dir(dir);
}

TEST(DistributedFusedAdam, LastBucketWithFewerWeightsThanRanksAndParamLargerThanBucket) {
  comm::MpiCommunicator world;
  const int dp = world.size();
  const std::size_t granule = 64 * static_cast<std::size_t>(dp);
  const std::size_t capacity = (BucketPlan::capacity_for(0.002, 4) + granule - 1) / granule * granule;
  // 2 * capacity + 1 weights: the third bucket holds one weight, its other dp - 1 shards are pure padding;
  // "c" (capacity + 1 weights) is larger than a bucket.
  const ParamList params = make_param_list(
      {{"a", capacity - 100, true}, {"b", 99, false}, {"c", capacity + 1, true}, {"tied_embedding", 1, true}});
  RunConfig config;
  config.steps = 6;
  config.micro_batches_per_rank = dp == 1 ? 2 : 1;
  Trained dfa(test_options("distributed_fused_adam"), params, &world);
  const auto& plan = dynamic_cast<const DistributedFusedAdam&>(*dfa.optimizer).plan();
  ASSERT_EQ(plan.buckets().size(), 3u);
  ASSERT_EQ(plan.buckets()[2].fragments.size(), 1u);
  EXPECT_EQ(plan.buckets()[2].fragments[0].numel, 1u);
  EXPECT_EQ(plan.first_bucket(2) + 1, plan.last_bucket(2));
  const float initial_tail = dfa.model->weight(params[3].offset);
  dfa.run(config);
  const Trained reference = one_rank_reference(test_options("fused_adam"), params, config, dp);
  const auto dir = shared_temp_dir("dfa-edge");
  const Snapshot a = snapshot(dfa, dir);
  const Snapshot b = snapshot(reference, private_subdir(dir));
  expect_same_run(a, b, dp <= 2, "edge layout");
  EXPECT_NE(a.weights.back(), initial_tail);  // the single weight of the last bucket trained
  for (std::size_t i = params.total_numel; i < dfa.optimizer->padded_numel(); ++i) {
    ASSERT_EQ(dfa.model->weight(i), 0.0f) << i;
  }
  remove_shared_dir(dir);
}

// Shard elements of one rank, from the bucket arithmetic alone.
std::size_t expected_shard_elements(std::size_t total, double bucket_cap_mb, int dp) {
  const std::size_t granule = 64 * static_cast<std::size_t>(dp);
  const std::size_t capacity = (BucketPlan::capacity_for(bucket_cap_mb, 4) + granule - 1) / granule * granule;
  const std::size_t full = (total - 1) / capacity;  // buckets before the last
  const std::size_t last = (total - full * capacity + granule - 1) / granule * granule;
  return (full * capacity + last) / static_cast<std::size_t>(dp);
}

TEST(DistributedFusedAdam, StateBytesPerRank) {
  comm::MpiCommunicator world;
  const int dp = world.size();
  const Stream stream;
  for (const bool gpt3 : {false, true}) {
    const ParamList params = gpt3 ? gpt3_126m_params() : synthetic_params();
    for (const bool remainders : {false, true}) {
      OptimizerOptions options = test_options("distributed_fused_adam");
      if (gpt3) options.bucket_cap_mb = 100;
      options.store_param_remainders = remainders;
      const auto optimizer = make_optimizer(options, params, world, stream);  // state_bytes needs no attach
      const std::size_t shard = expected_shard_elements(params.total_numel, options.bucket_cap_mb, dp);
      const std::size_t per_element = (remainders ? 2 : 4) + 4 + 4;
      EXPECT_EQ(optimizer->state_bytes(), per_element * shard);
      const double formula = static_cast<double>(per_element) * static_cast<double>(params.total_numel) / dp;
      if (world.rank() == 0) {
        std::printf("state_bytes %s dp=%d %s: %zu bytes per rank; formula (%zu)*N/d = %.0f; ratio %.6f\n",
                    gpt3 ? "GPT-3 126M" : "test model", dp, remainders ? "remainders" : "fp32 main",
                    optimizer->state_bytes(), per_element, formula,
                    static_cast<double>(optimizer->state_bytes()) / formula);
      }
    }
  }
}

}  // namespace
}  // namespace adamant::optim::testing
