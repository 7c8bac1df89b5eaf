// FusedAdam and DistributedFusedAdam on GPU buffers with the NCCL communicator
// against the same optimizers on host buffers with MPI (the CPU reference), on
// two ranks (mpirun -np 2, one GPU per rank), fed identical gradients.
//
// Why bitwise: both backends run the same orchestration code; the CUDA Adam and
// cast kernels match the CPU ones bit for bit; with two ranks every reduction the
// optimizer issues (reduce-scatter, all-reduce, fp32 or bf16) adds exactly two
// values, a + b == b + a, then rounds once. The squared grad norm is summed in
// another order (the GPU's blocks and warps, the CPU's chunks), but both add the
// exact fp64 squares of the fp32 gradients in fp64 and round once, into the fp32
// Adam factor: the norms agree to fp64 rounding (kNormTolerance) and the clip
// factor is the same fp32 value, so with clipping on too the weights, main weights
// and moments are asserted bitwise.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "adamant/comm/mpi_communicator.h"
#include "adamant/comm/process_grid.h"
#include "adamant/optim/bucket_plan.h"
#include "cuda_backend_run.h"
#include "mpi_test_helpers.h"

namespace adamant::optim::testing {
namespace {

constexpr double kNormTolerance = 1e-12;  // fp64 sums of the same exact squares in another order
constexpr int kMicroBatches = 2;          // per rank; grad_scale = 1 / (2 * dp) is a power of two for dp = 2
constexpr double kLearningRates[] = {3e-3, 6e-3, 1e-2};

void report(const std::string& line) {
  if (world_rank() == 0) std::printf("%s\n", line.c_str());
}

std::size_t count_different(std::span<const std::uint16_t> a, std::span<const std::uint16_t> b) {
  std::size_t count = 0;
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) count += a[i] != b[i] ? 1 : 0;
  return count;
}

struct Case {
  std::string label;
  const char* optimizer;
  DType grad_sync = DType::f32;
  bool remainders = false;
  bool overlap_grad = true;
  bool overlap_param = false;
  double clip = 0;  // trainer.gradient_clip_val; 0.5 is below every step's grad norm, so clipping is active
};

OptimizerOptions options_for(const Case& c) {
  OptimizerOptions options = test_options(c.optimizer);  // 0.002 MiB buckets: 5 to 9 of them on the test model
  options.grad_sync_dtype = c.grad_sync;
  options.store_param_remainders = c.remainders;
  options.overlap_grad_sync = c.overlap_grad;
  options.overlap_param_sync = c.overlap_param;
  options.gradient_clip_val = c.clip;
  return options;
}

// One NCCL communicator (and its MPI bootstrap) per test suite: creating one per test costs more than the test.
class BackendFixture {
 public:
  static void set_up() {
    bootstrap_ = std::make_unique<comm::MpiCommunicator>();
    device_comm_ = comm::make_device_communicator(*bootstrap_, device_under_test());
  }
  static void tear_down() {
    device_comm_.reset();
    bootstrap_.reset();
  }
  static comm::Communicator& device_comm() { return *device_comm_; }

 private:
  static inline std::unique_ptr<comm::MpiCommunicator> bootstrap_;
  static inline std::unique_ptr<comm::Communicator> device_comm_;
};

class GpuMatchesCpu : public ::testing::TestWithParam<Case> {
 protected:
  static void SetUpTestSuite() { BackendFixture::set_up(); }
  static void TearDownTestSuite() { BackendFixture::tear_down(); }
};

TEST_P(GpuMatchesCpu, AfterEveryStep) {
  const Case& c = GetParam();
  const OptimizerOptions options = options_for(c);
  comm::MpiCommunicator host_comm;
  comm::Communicator& device_comm = BackendFixture::device_comm();
  const int dp = host_comm.size();
  ASSERT_EQ(dp, 2) << "run under mpirun -np 2";
  ASSERT_EQ(device_comm.size(), dp);
  const ParamList params = synthetic_params();
  // The model has a parameter larger than a bucket (split across buckets and shards) and the tied embedding last.
  const std::size_t fc1 = params.index_of("decoder.mlp.fc1.weight");
  const BucketPlan plan(params, BucketPlan::capacity_for(options.bucket_cap_mb, dtype_size(options.grad_sync_dtype)),
                        std::string(c.optimizer) == "fused_adam" ? 1 : dp);
  ASSERT_LT(plan.capacity(), params[fc1].numel);
  ASSERT_EQ(params.params.back().name, "word_embeddings");

  BackendRun cpu(options, params, host_comm, Device::cpu());
  BackendRun gpu(options, params, device_comm, device_under_test());
  const auto dir = shared_temp_dir("optim-cuda-vs-cpu");
  std::size_t bf16_flips = 0;
  double main_difference = 0;
  for (std::int64_t step = 0; step < 3; ++step) {
    const std::string at = std::string(c.label) + " step " + std::to_string(step + 1);
    const auto grads = rank_gradients(params, cpu.weight_bits(), step, host_comm.rank(), dp, kMicroBatches);
    BackendRun* runs[] = {&cpu, &gpu};
    const auto results = step_together(runs, params, grads, kLearningRates[step], 1.0 / (kMicroBatches * dp));
    ASSERT_FALSE(results[0].skipped) << at;
    ASSERT_FALSE(results[1].skipped) << at;
    EXPECT_NEAR(results[1].grad_norm, results[0].grad_norm, kNormTolerance * results[0].grad_norm) << at;
    if (c.clip > 0) {
      EXPECT_GT(results[0].grad_norm, c.clip) << at << ": clipping must be active";
    }

    const auto cpu_weights = cpu.weight_bits();
    const auto gpu_weights = gpu.weight_bits();
    const FlatState cpu_state = cpu.saved_state(dir / ("cpu_" + std::to_string(step)));
    const FlatState gpu_state = gpu.saved_state(dir / ("gpu_" + std::to_string(step)));
    bf16_flips = std::max(bf16_flips, count_different(gpu_weights, cpu_weights));
    main_difference = std::max(main_difference, max_abs_difference(gpu_state.main, cpu_state.main));
    expect_bitwise_equal(gpu_weights, cpu_weights, at + ": bf16 model weights");
    expect_bitwise_equal(gpu_state.main, cpu_state.main, at + ": fp32 main weights");
    expect_bitwise_equal(gpu_state.exp_avg, cpu_state.exp_avg, at + ": exp_avg");
    expect_bitwise_equal(gpu_state.exp_avg_sq, cpu_state.exp_avg_sq, at + ": exp_avg_sq");
    // step() left the gradients for the next step to write over, and their padding zero.
    const auto left = gpu.grads();
    EXPECT_TRUE(std::all_of(left.begin() + static_cast<std::ptrdiff_t>(params.total_numel), left.end(), [](float g) {
      return g == 0.0f;
    })) << at;
  }
  report(std::string(c.label) + ": differing bf16 weights " + std::to_string(bf16_flips) +
         ", max |main weight difference| " + std::to_string(main_difference) + " (GPU vs CPU, 3 steps)");
  remove_shared_dir(dir);
}

std::vector<Case> all_cases() {
  std::vector<Case> cases = {
      {"FusedAdamOverlap", "fused_adam", DType::f32, false, true},
      {"FusedAdamNoOverlap", "fused_adam", DType::f32, false, false},
      {"FusedAdamClip", "fused_adam", DType::f32, false, true, false, 0.5},
  };
  // Every combination of sync dtype, remainders and overlaps for DistributedFusedAdam.
  for (const DType sync : {DType::f32, DType::bf16}) {
    for (const bool remainders : {false, true}) {
      for (const bool overlap_grad : {true, false}) {
        for (const bool overlap_param : {true, false}) {
          const std::string label =
              std::string("Dfa") + (sync == DType::f32 ? "Fp32Sync" : "Bf16Sync") + (remainders ? "Remainders" : "") +
              (overlap_grad ? "OverlapGrad" : "NoOverlapGrad") + (overlap_param ? "OverlapParam" : "NoOverlapParam");
          cases.push_back({label, "distributed_fused_adam", sync, remainders, overlap_grad, overlap_param});
        }
      }
    }
  }
  cases.push_back({"DfaFp32SyncClip", "distributed_fused_adam", DType::f32, false, true, true, 0.5});
  cases.push_back({"DfaBf16SyncRemaindersClip", "distributed_fused_adam", DType::bf16, true, true, false, 0.5});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Optimizers, GpuMatchesCpu, ::testing::ValuesIn(all_cases()),
                         [](const auto& info) { return info.param.label; });

// A checkpoint written on the GPU loads on the CPU and the other way round: save() and load() stage the device
// buffers through host memory, so both files hold the same bytes and training continues bitwise alike.
class CheckpointAcrossBackends : public ::testing::TestWithParam<Case> {
 protected:
  static void SetUpTestSuite() { BackendFixture::set_up(); }
  static void TearDownTestSuite() { BackendFixture::tear_down(); }
};

TEST_P(CheckpointAcrossBackends, GpuToCpuAndBack) {
  const Case& c = GetParam();
  const OptimizerOptions options = options_for(c);
  comm::MpiCommunicator host_comm;
  comm::Communicator& device_comm = BackendFixture::device_comm();
  const int dp = host_comm.size();
  ASSERT_EQ(dp, 2) << "run under mpirun -np 2";
  const ParamList params = synthetic_params();
  const Device device = device_under_test();
  BackendRun cpu(options, params, host_comm, Device::cpu());
  BackendRun gpu(options, params, device_comm, device);
  const double grad_scale = 1.0 / (kMicroBatches * dp);
  for (std::int64_t step = 0; step < 2; ++step) {
    const auto grads = rank_gradients(params, cpu.weight_bits(), step, host_comm.rank(), dp, kMicroBatches);
    BackendRun* runs[] = {&cpu, &gpu};
    step_together(runs, params, grads, kLearningRates[step], grad_scale);
  }
  const auto dir = shared_temp_dir("optim-cuda-checkpoint");
  const FlatState gpu_saved = gpu.saved_state(dir / "from_gpu");
  const FlatState cpu_saved = cpu.saved_state(dir / "from_cpu");
  expect_bitwise_equal(gpu_saved.main, cpu_saved.main, std::string(c.label) + ": saved main weights");

  // Fresh optimizers (initial weights, step 0) restored from the other backend's files.
  BackendRun cpu_from_gpu(options, params, host_comm, Device::cpu());
  BackendRun gpu_from_cpu(options, params, device_comm, device);
  cpu_from_gpu.optimizer().load(dir / "from_gpu");
  gpu_from_cpu.optimizer().load(dir / "from_cpu");
  EXPECT_EQ(cpu_from_gpu.optimizer().step_count(), 2);
  EXPECT_EQ(gpu_from_cpu.optimizer().step_count(), 2);
  const auto reference_weights = cpu.weight_bits();
  expect_bitwise_equal(cpu_from_gpu.weight_bits(), reference_weights, "CPU weights loaded from the GPU checkpoint");
  expect_bitwise_equal(gpu_from_cpu.weight_bits(), reference_weights, "GPU weights loaded from the CPU checkpoint");
  const FlatState gpu_resaved = gpu_from_cpu.saved_state(dir / "gpu_resaved");
  const FlatState cpu_resaved = cpu_from_gpu.saved_state(dir / "cpu_resaved");
  for (const FlatState* state : {&gpu_resaved, &cpu_resaved}) {
    expect_bitwise_equal(state->main, cpu_saved.main, "main weights after the round trip");
    expect_bitwise_equal(state->exp_avg, cpu_saved.exp_avg, "exp_avg after the round trip");
    expect_bitwise_equal(state->exp_avg_sq, cpu_saved.exp_avg_sq, "exp_avg_sq after the round trip");
  }

  // One more step on all four: the restored runs continue exactly as the uninterrupted ones.
  const auto grads = rank_gradients(params, reference_weights, 2, host_comm.rank(), dp, kMicroBatches);
  BackendRun* runs[] = {&cpu, &gpu, &cpu_from_gpu, &gpu_from_cpu};
  const auto results = step_together(runs, params, grads, kLearningRates[2], grad_scale);
  const auto expected = cpu.weight_bits();
  expect_bitwise_equal(gpu.weight_bits(), expected, "GPU, uninterrupted, step 3");
  expect_bitwise_equal(cpu_from_gpu.weight_bits(), expected, "CPU restored from the GPU, step 3");
  expect_bitwise_equal(gpu_from_cpu.weight_bits(), expected, "GPU restored from the CPU, step 3");
  EXPECT_EQ(results[2].grad_norm, results[0].grad_norm);  // same backend, same gradients: same reduction
  EXPECT_EQ(results[3].grad_norm, results[1].grad_norm);
  remove_shared_dir(dir);
}

INSTANTIATE_TEST_SUITE_P(Optimizers, CheckpointAcrossBackends,
                         ::testing::Values(Case{"FusedAdam", "fused_adam"}, Case{"Dfa", "distributed_fused_adam"},
                                           Case{"DfaRemaindersOverlapParam", "distributed_fused_adam", DType::f32, true,
                                                true, true}),
                         [](const auto& info) { return info.param.label; });

}  // namespace
}  // namespace adamant::optim::testing
