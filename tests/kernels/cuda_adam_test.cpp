// CUDA Adam kernels against the CPU reference kernels (kernels/cpu), bit for bit:
// random data over many segments with unaligned starts and padding gaps, fp32 and
// bf16 gradients, AdamW and L2 decay, every model copy dtype, aligned and
// unaligned views, several steps, and 1.3e7 elements. The remainder variant must
// rebuild the fp32 main weights of the plain variant exactly.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "adamant/core/half.h"
#include "adamant/kernels/adam.h"
#include "adamant/kernels/cpu/model_kernels_cpu.h"
#include "kernels/cuda_test_util.h"

namespace adamant::kernels {
namespace {

using testing::MirroredArray;
using testing::SegmentLayout;

AdamArgs args_for(std::int64_t step, bool adamw) {
  AdamArgs args;
  args.lr = 1e-2f;
  args.beta1 = 0.9f;
  args.beta2 = 0.95f;
  args.eps = 1e-8f;
  args.weight_decay = 0.1f;
  args.adamw = adamw;
  args.step = step;
  args.grad_scale = 0.37f;
  return args;
}

// The gradient of one step: fp32 values, or their bf16 patterns.
struct Gradient {
  Gradient(std::size_t numel, DType dtype, std::size_t offset)
      : dtype(dtype), f32(numel, DType::f32, offset), bf16(numel, DType::bf16, offset) {}
  void randomize(std::mt19937_64& rng) {
    for (std::size_t i = 0; i < f32.host.size(); ++i) {
      f32.host[i] = testing::random_magnitude(rng, -5, 0);
      bf16.host[i] = f32_to_bf16(f32.host[i]);
    }
    if (dtype == DType::f32) {
      f32.upload();
    } else {
      bf16.upload();
    }
  }
  Tensor device_view() { return dtype == DType::f32 ? f32.device_view() : bf16.device_view(); }
  Tensor host_view() { return dtype == DType::f32 ? f32.host_view() : bf16.host_view(); }

  DType dtype;
  MirroredArray<float> f32;
  MirroredArray<std::uint16_t> bf16;
};

// Optimizer state in fp32 with the moments of an earlier step when first_step > 1.
struct MainState {
  MainState(std::size_t numel, std::size_t offset, std::mt19937_64& rng, bool warm)
      : main(numel, DType::f32, offset), m(numel, DType::f32, offset), v(numel, DType::f32, offset) {
    for (std::size_t i = 0; i < numel; ++i) {
      main.host[i] = testing::random_magnitude(rng, -3, 0.5);
      m.host[i] = warm ? testing::random_magnitude(rng, -6, -2) : 0.0f;
      v.host[i] = warm ? m.host[i] * m.host[i] * 2.0f : 0.0f;
    }
    main.upload();
    m.upload();
    v.upload();
  }
  MirroredArray<float> main, m, v;
};

enum class Copy { none, bf16, f16, f32 };

std::string copy_name(Copy c) {
  switch (c) {
    case Copy::none:
      return "NoCopy";
    case Copy::bf16:
      return "Bf16Copy";
    case Copy::f16:
      return "Fp16Copy";
    case Copy::f32:
      return "Fp32Copy";
  }
  return "?";
}

// Runs `steps` steps on the CPU reference and on the GPU from the same state and
// compares every array bitwise (padding included: neither may touch it).
void compare_adam(const SegmentLayout& layout, DType grad_dtype, Copy copy, bool adamw, std::size_t offset,
                  std::int64_t first_step, int steps, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const std::size_t n = layout.numel;
  MirroredArray<std::int64_t> segments(layout.table.size(), DType::i64);
  segments.host = layout.table;
  segments.upload();
  MainState state(n, offset, rng, first_step > 1);
  const std::vector<float> initial_main = state.main.host;
  Gradient grad(n, grad_dtype, offset);
  // Model copies start as junk so that untouched padding is visible.
  MirroredArray<std::uint16_t> copy16(n, copy == Copy::f16 ? DType::f16 : DType::bf16, offset);
  MirroredArray<float> copy32(n, DType::f32, offset);
  std::uniform_int_distribution<int> junk(0, 0x7bff);
  for (std::size_t i = 0; i < n; ++i) {
    copy16.host[i] = static_cast<std::uint16_t>(junk(rng));
    copy32.host[i] = static_cast<float>(junk(rng));
  }
  copy16.upload();
  copy32.upload();
  auto copy_view = [&](bool device) {
    switch (copy) {
      case Copy::none:
        return Tensor();
      case Copy::f32:
        return device ? copy32.device_view() : copy32.host_view();
      default:
        return device ? copy16.device_view() : copy16.host_view();
    }
  };

  Stream stream(testing::gpu());
  for (int s = 0; s < steps; ++s) {
    const AdamArgs args = args_for(first_step + s, adamw);
    grad.randomize(rng);
    cpu::adam_step(args, segments.host_view(), grad.host_view(), state.main.host_view(), state.m.host_view(),
                   state.v.host_view(), copy_view(false));
    adam_step(args, segments.device_view(), grad.device_view(), state.main.device_view(), state.m.device_view(),
              state.v.device_view(), copy_view(true), stream);
    stream.synchronize();  // the next step's gradient upload must not overtake this step
  }

  const std::vector<float> gpu_main = state.main.download();
  testing::expect_bitwise_equal(gpu_main, state.main.host, "main weights");
  testing::expect_bitwise_equal(state.m.download(), state.m.host, "exp_avg");
  testing::expect_bitwise_equal(state.v.download(), state.v.host, "exp_avg_sq");
  if (copy == Copy::f32) testing::expect_bitwise_equal(copy32.download(), copy32.host, "fp32 model copy");
  if (copy == Copy::bf16 || copy == Copy::f16)
    testing::expect_bitwise_equal(copy16.download(), copy16.host, "16-bit model copy");

  // Independently of the CPU: padding kept its value, segment elements moved.
  std::vector<bool> in_segment(n, false);
  for (std::size_t s = 0; s < layout.table.size(); s += 3) {
    for (auto i = layout.table[s]; i < layout.table[s + 1]; ++i) in_segment[static_cast<std::size_t>(i)] = true;
  }
  std::size_t moved = 0;
  std::size_t segment_elements = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (!in_segment[i]) {
      ASSERT_EQ(std::bit_cast<std::uint32_t>(gpu_main[i]), std::bit_cast<std::uint32_t>(initial_main[i]))
          << "padding element " << i << " changed";
    } else {
      ++segment_elements;
      moved += gpu_main[i] != initial_main[i] ? 1 : 0;
    }
  }
  EXPECT_GT(moved, segment_elements * 9 / 10) << "most weights must change over " << steps << " steps";
}

// grad dtype, model copy, AdamW, unaligned (offset 1) views.
using AdamCase = std::tuple<DType, Copy, bool, bool>;

class CudaAdamMatchesCpu : public ::testing::TestWithParam<AdamCase> {};

TEST_P(CudaAdamMatchesCpu, ManySegmentsWithGaps) {
  ADAMANT_REQUIRE_GPU();
  const auto [grad_dtype, copy, adamw, unaligned] = GetParam();
  std::mt19937_64 rng(11);
  const SegmentLayout layout = testing::random_layout(rng, 300, 3, 40, 5000);
  compare_adam(layout, grad_dtype, copy, adamw, unaligned ? 1 : 0, 1, 3, 101);
}

TEST_P(CudaAdamMatchesCpu, ThousandsOfTinySegmentsAtALateStep) {
  ADAMANT_REQUIRE_GPU();
  const auto [grad_dtype, copy, adamw, unaligned] = GetParam();
  std::mt19937_64 rng(12);
  const SegmentLayout layout = testing::random_layout(rng, 4000, 1, 9, 64);
  compare_adam(layout, grad_dtype, copy, adamw, unaligned ? 1 : 0, 1000, 2, 102);
}

INSTANTIATE_TEST_SUITE_P(AllVariants, CudaAdamMatchesCpu,
                         ::testing::Combine(::testing::Values(DType::f32, DType::bf16),
                                            ::testing::Values(Copy::none, Copy::bf16, Copy::f16, Copy::f32),
                                            ::testing::Bool(), ::testing::Bool()),
                         [](const ::testing::TestParamInfo<AdamCase>& info) {
                           return std::string(std::get<0>(info.param) == DType::f32 ? "Fp32Grad" : "Bf16Grad") +
                                  copy_name(std::get<1>(info.param)) + (std::get<2>(info.param) ? "AdamW" : "L2") +
                                  (std::get<3>(info.param) ? "Unaligned" : "Aligned");
                         });

TEST(CudaAdam, ThirteenMillionElementsMatchCpu) {
  ADAMANT_REQUIRE_GPU();
  std::mt19937_64 rng(13);
  const SegmentLayout layout = testing::random_layout(rng, 800, 77, 100, 200000);
  ASSERT_GT(layout.numel, 10'000'000u);
  compare_adam(layout, DType::f32, Copy::bf16, true, 0, 1, 3, 103);
}

// Plain fp32 variant (with bf16 copy), remainder variant on the GPU, and the remainder
// variant on the CPU, from one initial state.
// sm_count > 0: the remainder variant on that many SMs (bulk copies where the views are aligned).
// factor_on_device: the GPU kernels read the grad scale from a step factor on the device (AdamArgs::step_factor)
// where the CPU takes it by value.
void compare_remainder(const SegmentLayout& layout, DType grad_dtype, bool adamw, std::size_t offset, int steps,
                       std::uint64_t seed, int sm_count = 0, bool factor_on_device = false) {
  std::mt19937_64 rng(seed);
  const std::size_t n = layout.numel;
  MirroredArray<std::int64_t> segments(layout.table.size(), DType::i64);
  segments.host = layout.table;
  segments.upload();
  MainState plain(n, offset, rng, false);
  MirroredArray<std::uint16_t> plain_copy(n, DType::bf16, offset);
  MirroredArray<float> rem_m(n, DType::f32, offset), rem_v(n, DType::f32, offset);
  MirroredArray<std::uint16_t> high(n, DType::bf16, offset), low(n, DType::u16, offset);
  for (std::size_t i = 0; i < n; ++i) {
    high.host[i] = bf16_round_for_remainder(plain.main.host[i]);
    low.host[i] = remainder_of(plain.main.host[i], high.host[i]);
    ASSERT_EQ(join_remainder(high.host[i], low.host[i]), plain.main.host[i]);
    plain_copy.host[i] = high.host[i];
  }
  for (auto* a : {&plain_copy, &high, &low}) a->upload();
  rem_m.upload();
  rem_v.upload();
  Gradient grad(n, grad_dtype, offset);

  MirroredArray<float> factor(2, DType::f32);
  factor.host = {args_for(1, adamw).grad_scale, 0.0f};
  factor.upload();
  Stream stream(testing::gpu());
  for (int s = 0; s < steps; ++s) {
    const AdamArgs args = args_for(1 + s, adamw);
    AdamArgs gpu_args = args;
    if (factor_on_device) {
      gpu_args.grad_scale = 9.0f;  // not read: the factor's is
      gpu_args.step_factor = factor.device_view();
    }
    grad.randomize(rng);
    adam_step(gpu_args, segments.device_view(), grad.device_view(), plain.main.device_view(), plain.m.device_view(),
              plain.v.device_view(), plain_copy.device_view(), stream);
    adam_step_remainder(gpu_args, segments.device_view(), grad.device_view(), low.device_view(), rem_m.device_view(),
                        rem_v.device_view(), high.device_view(), stream, sm_count);
    cpu::adam_step_remainder(args, segments.host_view(), grad.host_view(), low.host_view(), rem_m.host_view(),
                             rem_v.host_view(), high.host_view());
    stream.synchronize();  // the next step's gradient upload must not overtake this step
  }

  const std::vector<std::uint16_t> gpu_high = high.download();
  const std::vector<std::uint16_t> gpu_low = low.download();
  const std::vector<float> gpu_main = plain.main.download();
  std::vector<float> rebuilt(n);
  for (std::size_t i = 0; i < n; ++i) rebuilt[i] = join_remainder(gpu_high[i], gpu_low[i]);
  testing::expect_bitwise_equal(rebuilt, gpu_main, "main weights rebuilt from bf16 + remainder");
  testing::expect_bitwise_equal(gpu_high, plain_copy.download(), "bf16 weights of both variants");
  testing::expect_bitwise_equal(rem_m.download(), plain.m.download(), "exp_avg of both variants");
  testing::expect_bitwise_equal(gpu_high, high.host, "bf16 weights, GPU vs CPU");
  testing::expect_bitwise_equal(gpu_low, low.host, "remainders, GPU vs CPU");
  testing::expect_bitwise_equal(rem_v.download(), rem_v.host, "exp_avg_sq, GPU vs CPU");
}

using RemainderCase = std::tuple<DType, bool, bool>;
class CudaAdamRemainder : public ::testing::TestWithParam<RemainderCase> {};

TEST_P(CudaAdamRemainder, RebuildsFp32MainWeightsExactly) {
  ADAMANT_REQUIRE_GPU();
  const auto [grad_dtype, adamw, unaligned] = GetParam();
  std::mt19937_64 rng(21);
  const SegmentLayout layout = testing::random_layout(rng, 500, 5, 33, 4000);
  compare_remainder(layout, grad_dtype, adamw, unaligned ? 1 : 0, 4, 201);
}

INSTANTIATE_TEST_SUITE_P(AllVariants, CudaAdamRemainder,
                         ::testing::Combine(::testing::Values(DType::f32, DType::bf16), ::testing::Bool(),
                                            ::testing::Bool()),
                         [](const ::testing::TestParamInfo<RemainderCase>& info) {
                           return std::string(std::get<0>(info.param) == DType::f32 ? "Fp32Grad" : "Bf16Grad") +
                                  (std::get<1>(info.param) ? "AdamW" : "L2") +
                                  (std::get<2>(info.param) ? "Unaligned" : "Aligned");
                         });

// On a few SMs by bulk copies: chunks of 4096 elements over 3 and 8 blocks with a partial last
// chunk, segments with gaps across chunk edges; unaligned views take the whole-GPU kernel.
TEST_P(CudaAdamRemainder, OnAFewSmsTheSameBits) {
  ADAMANT_REQUIRE_GPU();
  const auto [grad_dtype, adamw, unaligned] = GetParam();
  std::mt19937_64 rng(23);
  const SegmentLayout layout = testing::random_layout(rng, 120, 5, 33, 9000);
  ASSERT_GT(layout.numel, 3u * 4096u);
  for (const int sm_count : {3, 8}) {
    SCOPED_TRACE("on " + std::to_string(sm_count) + " SMs");
    compare_remainder(layout, grad_dtype, adamw, unaligned ? 1 : 0, 4, 203, sm_count);
  }
}

TEST_P(CudaAdamRemainder, StepFactorOnTheDeviceTheSameBits) {
  ADAMANT_REQUIRE_GPU();
  const auto [grad_dtype, adamw, unaligned] = GetParam();
  std::mt19937_64 rng(24);
  const SegmentLayout layout = testing::random_layout(rng, 120, 5, 33, 9000);
  for (const int sm_count : {0, 8}) {
    SCOPED_TRACE("on " + std::to_string(sm_count) + " SMs (0: all)");
    compare_remainder(layout, grad_dtype, adamw, unaligned ? 1 : 0, 3, 205, sm_count, true);
  }
}

// A step factor that says skip: every kernel (plain with a bf16 copy, remainders on the whole GPU and by
// bulk copies on a few SMs) leaves every operand as it was.
TEST(CudaAdam, ASkippingStepFactorLeavesEveryOperand) {
  ADAMANT_REQUIRE_GPU();
  std::mt19937_64 rng(25);
  const SegmentLayout layout = testing::random_layout(rng, 60, 0, 20, 9000);
  const std::size_t n = layout.numel;
  MirroredArray<std::int64_t> segments(layout.table.size(), DType::i64);
  segments.host = layout.table;
  segments.upload();
  MainState state(n, 0, rng, true);
  MirroredArray<std::uint16_t> copy(n, DType::bf16), low(n, DType::u16);
  for (std::size_t i = 0; i < n; ++i) {
    copy.host[i] = bf16_round_for_remainder(state.main.host[i]);
    low.host[i] = remainder_of(state.main.host[i], copy.host[i]);
  }
  copy.upload();
  low.upload();
  Gradient grad(n, DType::f32, 0);
  grad.randomize(rng);
  MirroredArray<float> factor(2, DType::f32);
  factor.host = {0.37f, 1.0f};
  factor.upload();
  AdamArgs args = args_for(3, true);
  args.step_factor = factor.device_view();
  Stream stream(testing::gpu());
  adam_step(args, segments.device_view(), grad.device_view(), state.main.device_view(), state.m.device_view(),
            state.v.device_view(), copy.device_view(), stream);
  for (const int sm_count : {0, 8}) {
    adam_step_remainder(args, segments.device_view(), grad.device_view(), low.device_view(), state.m.device_view(),
                        state.v.device_view(), copy.device_view(), stream, sm_count);
  }
  stream.synchronize();
  testing::expect_bitwise_equal(state.main.download(), state.main.host, "main weights");
  testing::expect_bitwise_equal(state.m.download(), state.m.host, "exp_avg");
  testing::expect_bitwise_equal(state.v.download(), state.v.host, "exp_avg_sq");
  testing::expect_bitwise_equal(copy.download(), copy.host, "bf16 weights");
  testing::expect_bitwise_equal(low.download(), low.host, "remainders");
}

// The factor resolved on the GPU against step_factor_of on the host, bit for bit: norms over 40 orders of
// magnitude, loss scales, clipping on and off, infinite and NaN norms.
TEST(CudaStepFactor, MatchesTheHostFunctionBitForBit) {
  ADAMANT_REQUIRE_GPU();
  std::mt19937_64 rng(26);
  std::uniform_real_distribution<double> exponent(-10.0, 30.0);
  const double clips[] = {0.0, 0.5, 1.0, 100.0};
  const double loss_scales[] = {1.0, 65536.0, 0.125};
  std::vector<double> squared_norms = {0.0, std::numeric_limits<double>::infinity(),
                                       std::numeric_limits<double>::quiet_NaN()};
  for (int i = 0; i < 200; ++i) squared_norms.push_back(std::pow(10.0, exponent(rng)));
  MirroredArray<double> norm(1, DType::f64);
  MirroredArray<float> factor(2, DType::f32);
  Stream stream(testing::gpu());
  int clipped = 0;
  for (std::size_t i = 0; i < squared_norms.size(); ++i) {
    const StepFactorInputs inputs{1.0 / static_cast<double>(1 + i % 7), loss_scales[i % 3], clips[i % 4]};
    norm.host[0] = squared_norms[i];
    norm.upload();
    resolve_step_factor(norm.device_view(), inputs, factor.device_view(), stream);
    stream.synchronize();
    const std::vector<float> gpu = factor.download();
    const StepFactor host = step_factor_of(squared_norms[i], inputs);
    ASSERT_EQ(gpu[1], host.finite ? 0.0f : 1.0f) << squared_norms[i];
    ASSERT_EQ(std::bit_cast<std::uint32_t>(gpu[0]), std::bit_cast<std::uint32_t>(host.adam_grad_scale))
        << squared_norms[i] << " clip " << inputs.clip_val;
    if (host.finite && host.adam_grad_scale != static_cast<float>(inputs.grad_scale / inputs.loss_scale)) ++clipped;
  }
  EXPECT_GT(clipped, 20);  // the clipping branch ran
}

TEST(CudaAdamRemainder, ThirteenMillionElementsRebuildExactly) {
  ADAMANT_REQUIRE_GPU();
  std::mt19937_64 rng(22);
  const SegmentLayout layout = testing::random_layout(rng, 800, 2, 100, 200000);
  ASSERT_GT(layout.numel, 10'000'000u);
  compare_remainder(layout, DType::bf16, false, 0, 3, 202);
  compare_remainder(layout, DType::f32, true, 0, 2, 204, 16);  // on 16 SMs by bulk copies
}

}  // namespace
}  // namespace adamant::kernels
