// CPU optimizer kernels against independent references: Adam against the scalar
// formulas in double, the remainder variant against the fp32 variant (bitwise),
// squared_norm against a direct sum, casts against core/half.h.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "adamant/core/error.h"
#include "adamant/core/half.h"
#include "adamant/kernels/adam.h"
#include "adamant/kernels/elementwise.h"
#include "adamant/kernels/reduce.h"
#include "workspace_test_util.h"

namespace adamant::kernels {
namespace {

template <typename T>
Tensor view(std::vector<T>& v, DType dtype = dtype_of<T>()) {
  return Tensor::flat(v.data(), dtype, Device::cpu(), v.size());
}

std::uint32_t bits_of(float f) { return std::bit_cast<std::uint32_t>(f); }

// Shard of 12 elements: a decay segment, a no-decay segment, a decay segment;
// elements 7 and 11 are padding.
constexpr std::size_t kShard = 12;
const std::vector<std::int64_t> kSegments = {0, 4, 1, 4, 7, 0, 8, 11, 1};
bool is_padding(std::size_t i) { return i == 7 || i == 11; }
bool decays(std::size_t i) { return i < 4 || (i >= 8 && i < 11); }

double initial_param(std::size_t i) { return (i % 2 == 0 ? 1.0 : -1.0) * (0.25 + 0.125 * static_cast<double>(i)); }
double gradient(std::size_t i, int step) { return 0.75 * std::sin(1.3 * static_cast<double>(i) + 0.7 * step) + 0.05; }

struct ReferenceState {
  std::vector<double> p, m, v;
};

// The Adam formulas of adam.h written out in double, one element at a time.
ReferenceState reference_adam(const AdamArgs& args, int steps) {
  ReferenceState s{std::vector<double>(kShard), std::vector<double>(kShard, 0.0), std::vector<double>(kShard, 0.0)};
  for (std::size_t i = 0; i < kShard; ++i) s.p[i] = static_cast<float>(initial_param(i));
  const double b1 = args.beta1, b2 = args.beta2;
  for (int t = 1; t <= steps; ++t) {
    for (std::size_t i = 0; i < kShard; ++i) {
      if (is_padding(i)) continue;
      const double wd = decays(i) ? static_cast<double>(args.weight_decay) : 0.0;
      double g = static_cast<double>(static_cast<float>(gradient(i, t))) * args.grad_scale;
      if (!args.adamw) g += wd * s.p[i];
      s.m[i] = b1 * s.m[i] + (1 - b1) * g;
      s.v[i] = b2 * s.v[i] + (1 - b2) * g * g;
      const double denom = std::sqrt(s.v[i] / (1 - std::pow(b2, t))) + args.eps;
      double update = (s.m[i] / (1 - std::pow(b1, t))) / denom;
      if (args.adamw) update += wd * s.p[i];
      s.p[i] -= args.lr * update;
    }
  }
  return s;
}

struct KernelState {
  std::vector<float> main, m, v, grad;
  std::vector<std::uint16_t> model;  // bf16 or fp16 copy
  std::vector<float> model_f32;
};

constexpr float kSentinel = 123.25f;

KernelState initial_kernel_state() {
  KernelState s;
  s.main.resize(kShard);
  s.m.assign(kShard, 0.0f);
  s.v.assign(kShard, 0.0f);
  s.grad.assign(kShard, 0.0f);
  s.model.assign(kShard, 0x7777);
  s.model_f32.assign(kShard, kSentinel);
  for (std::size_t i = 0; i < kShard; ++i) {
    s.main[i] = static_cast<float>(initial_param(i));
    if (is_padding(i)) s.main[i] = s.m[i] = s.v[i] = kSentinel;
  }
  return s;
}

AdamArgs test_args(bool adamw) {
  AdamArgs args;
  args.lr = 0.01f;
  args.beta1 = 0.9f;
  args.beta2 = 0.95f;  // small enough that the bias corrections matter over 3 steps
  args.eps = 1e-8f;
  args.weight_decay = 0.1f;
  args.adamw = adamw;
  args.grad_scale = 0.5f;
  return args;
}

void run_three_steps(KernelState& s, AdamArgs args, Tensor model_copy) {
  std::vector<std::int64_t> segments = kSegments;
  for (int t = 1; t <= 3; ++t) {
    for (std::size_t i = 0; i < kShard; ++i) s.grad[i] = is_padding(i) ? 1e30f : static_cast<float>(gradient(i, t));
    args.step = t;
    adam_step(args, view(segments), view(s.grad), view(s.main), view(s.m), view(s.v), model_copy, Stream());
  }
}

class AdamClosedForm : public ::testing::TestWithParam<bool> {};

TEST_P(AdamClosedForm, MatchesDoubleReferenceOverThreeSteps) {
  const AdamArgs args = test_args(GetParam());
  KernelState s = initial_kernel_state();
  run_three_steps(s, args, view(s.model, DType::bf16));
  const ReferenceState ref = reference_adam(args, 3);
  for (std::size_t i = 0; i < kShard; ++i) {
    if (is_padding(i)) {
      EXPECT_EQ(s.main[i], kSentinel) << i;
      EXPECT_EQ(s.m[i], kSentinel) << i;
      EXPECT_EQ(s.v[i], kSentinel) << i;
      EXPECT_EQ(s.model[i], 0x7777) << i;
      continue;
    }
    // fp32 maths vs double: a few ulps of p (|p| <= 2) and of the moments.
    EXPECT_NEAR(s.main[i], ref.p[i], 1e-6) << i;
    EXPECT_NEAR(s.m[i], ref.m[i], 1e-6 * std::abs(ref.m[i]) + 1e-9) << i;
    EXPECT_NEAR(s.v[i], ref.v[i], 1e-6 * std::abs(ref.v[i]) + 1e-12) << i;
    EXPECT_EQ(s.model[i], bf16_round_for_remainder(s.main[i])) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(AdamWAndL2, AdamClosedForm, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "AdamW" : "L2"; });

TEST(AdamKernel, FirstStepIsSignOfGradientPlusDecay) {
  // With m = v = 0, step 1 gives m_hat = g and v_hat = g^2, so update = g / (|g| + eps) = sign(g).
  for (bool adamw : {true, false}) {
    AdamArgs args = test_args(adamw);
    args.step = 1;
    KernelState s = initial_kernel_state();
    for (std::size_t i = 0; i < kShard; ++i) s.grad[i] = static_cast<float>(gradient(i, 1));
    std::vector<std::int64_t> segments = kSegments;
    adam_step(args, view(segments), view(s.grad), view(s.main), view(s.m), view(s.v), Tensor(), Stream());
    for (std::size_t i = 0; i < kShard; ++i) {
      if (is_padding(i)) continue;
      const double p0 = static_cast<float>(initial_param(i));
      const double wd = decays(i) ? 0.1 : 0.0;
      const double g = 0.5 * static_cast<float>(gradient(i, 1)) + (adamw ? 0.0 : wd * p0);
      const double expected = p0 - 0.01 * ((g > 0 ? 1.0 : -1.0) + (adamw ? wd * p0 : 0.0));
      EXPECT_NEAR(s.main[i], expected, 1e-6) << "element " << i << (adamw ? " AdamW" : " L2");
    }
  }
}

TEST(AdamKernel, ModelCopyDtypesShareTheSameMainWeights) {
  const AdamArgs args = test_args(true);
  KernelState in_place = initial_kernel_state();  // no copy: main is the model weight
  run_three_steps(in_place, args, Tensor());
  KernelState bf16 = initial_kernel_state();
  run_three_steps(bf16, args, view(bf16.model, DType::bf16));
  KernelState f16 = initial_kernel_state();
  run_three_steps(f16, args, view(f16.model, DType::f16));
  KernelState f32 = initial_kernel_state();
  run_three_steps(f32, args, view(f32.model_f32));
  for (std::size_t i = 0; i < kShard; ++i) {
    EXPECT_EQ(bits_of(bf16.main[i]), bits_of(in_place.main[i])) << i;
    EXPECT_EQ(bits_of(f16.main[i]), bits_of(in_place.main[i])) << i;
    EXPECT_EQ(bits_of(f32.main[i]), bits_of(in_place.main[i])) << i;
    if (is_padding(i)) {
      EXPECT_EQ(f16.model[i], 0x7777);
      EXPECT_EQ(f32.model_f32[i], kSentinel);
      continue;
    }
    EXPECT_EQ(bf16.model[i], bf16_round_for_remainder(in_place.main[i])) << i;
    EXPECT_EQ(f16.model[i], f32_to_f16(in_place.main[i])) << i;  // fp16 copies round to nearest even
    EXPECT_EQ(bits_of(f32.model_f32[i]), bits_of(in_place.main[i])) << i;
  }
}

TEST(AdamKernel, Bf16GradientsEqualTheirFp32Values) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const std::size_t n = 1000;
  std::vector<std::int64_t> segments = {0, 400, 1, 400, 1000, 0};
  std::vector<std::uint16_t> grad_bf16(n);
  std::vector<float> grad_f32(n), main_a(n), main_b(n), m_a(n, 0), m_b(n, 0), v_a(n, 0), v_b(n, 0);
  for (std::size_t i = 0; i < n; ++i) {
    grad_bf16[i] = f32_to_bf16(normal(rng));
    grad_f32[i] = bf16_to_f32(grad_bf16[i]);
    main_a[i] = main_b[i] = normal(rng);
  }
  AdamArgs args = test_args(true);
  for (int t = 1; t <= 2; ++t) {
    args.step = t;
    adam_step(args, view(segments), view(grad_bf16, DType::bf16), view(main_a), view(m_a), view(v_a), Tensor(),
              Stream());
    adam_step(args, view(segments), view(grad_f32), view(main_b), view(m_b), view(v_b), Tensor(), Stream());
  }
  for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(bits_of(main_a[i]), bits_of(main_b[i])) << i;
}

TEST(AdamKernel, RejectsBadSegments) {
  KernelState s = initial_kernel_state();
  AdamArgs args = test_args(true);
  std::vector<std::int64_t> out_of_range = {0, 13, 1};
  EXPECT_THROW(
      adam_step(args, view(out_of_range), view(s.grad), view(s.main), view(s.m), view(s.v), Tensor(), Stream()), Error);
  std::vector<std::int64_t> overlapping = {0, 6, 1, 5, 8, 0};
  EXPECT_THROW(adam_step(args, view(overlapping), view(s.grad), view(s.main), view(s.m), view(s.v), Tensor(), Stream()),
               Error);
}

TEST(AdamKernel, RemainderVariantIsBitwiseEqualToFp32Variant) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const std::size_t n = 5003;
  std::vector<std::int64_t> segments = {0, 1000, 1, 1000, 1017, 0, 1100, 4000, 1, 4000, 5000, 0};
  std::vector<float> main(n), grad(n), m_fp32(n, 0), v_fp32(n, 0), m_rem(n, 0), v_rem(n, 0);
  std::vector<std::uint16_t> model_fp32(n), model_rem(n), remainder(n);
  for (std::size_t i = 0; i < n; ++i) {
    // Start from bf16 weights, as after attach() of a bf16 model: the remainder is 0.
    model_fp32[i] = model_rem[i] = f32_to_bf16(normal(rng) * 0.05f);
    main[i] = bf16_to_f32(model_fp32[i]);
  }
  const std::vector<std::uint16_t> initial_model = model_fp32;
  AdamArgs args = test_args(true);
  args.lr = 3e-3f;
  for (int t = 1; t <= 5; ++t) {
    for (std::size_t i = 0; i < n; ++i) grad[i] = normal(rng);
    args.step = t;
    args.adamw = t % 2 == 1;  // both modes go through the same element code
    adam_step(args, view(segments), view(grad), view(main), view(m_fp32), view(v_fp32), view(model_fp32, DType::bf16),
              Stream());
    adam_step_remainder(args, view(segments), view(grad), view(remainder, DType::u16), view(m_rem), view(v_rem),
                        view(model_rem, DType::bf16), Stream());
    for (std::size_t i = 0; i < n; ++i) {
      ASSERT_EQ(model_rem[i], model_fp32[i]) << "step " << t << " element " << i;
      ASSERT_EQ(bits_of(join_remainder(model_rem[i], remainder[i])), bits_of(main[i])) << t << " " << i;
      ASSERT_EQ(bits_of(m_rem[i]), bits_of(m_fp32[i]));
      ASSERT_EQ(bits_of(v_rem[i]), bits_of(v_fp32[i]));
    }
  }
  // Element 1050 lies between segments: untouched by both variants.
  EXPECT_EQ(model_fp32[1050], initial_model[1050]);
  EXPECT_EQ(model_rem[1050], initial_model[1050]);
  EXPECT_EQ(remainder[1050], 0);
  EXPECT_NE(join_remainder(model_rem[1016], remainder[1016]), bf16_to_f32(initial_model[1016]));  // in a segment
}

// Adam with AdamArgs::step_factor: the factor's grad scale gives the bits of the same scale passed by
// value, and a skip leaves every operand as it was, in both variants.
TEST(AdamKernel, StepFactorGivesTheValuesBitsAndASkipLeavesEverything) {
  for (const bool remainders : {false, true}) {
    for (const float skip : {0.0f, 1.0f}) {
      KernelState by_value = initial_kernel_state();
      KernelState by_factor = initial_kernel_state();
      std::vector<std::uint16_t> low_by_value(kShard, 0), low_by_factor(kShard, 0);
      for (std::size_t i = 0; i < kShard; ++i) {
        by_value.model[i] = by_factor.model[i] = bf16_round_for_remainder(by_value.main[i]);
        by_value.grad[i] = by_factor.grad[i] = static_cast<float>(gradient(i, 1));
        by_factor.m[i] = by_value.m[i] = 0.01f * static_cast<float>(i);
        by_factor.v[i] = by_value.v[i] = 0.002f * static_cast<float>(i + 1);
      }
      const KernelState before = by_factor;
      std::vector<float> factor = {0.37f, skip};
      AdamArgs value_args = test_args(true);
      value_args.step = 2;
      value_args.grad_scale = 0.37f;
      AdamArgs factor_args = value_args;
      factor_args.grad_scale = 5.0f;  // not read: the factor's scale is
      factor_args.step_factor = view(factor);
      std::vector<std::int64_t> segments = kSegments;
      const auto run = [&](const AdamArgs& args, KernelState& s, std::vector<std::uint16_t>& low) {
        if (remainders) {
          adam_step_remainder(args, view(segments), view(s.grad), view(low, DType::u16), view(s.m), view(s.v),
                              view(s.model, DType::bf16), Stream());
        } else {
          adam_step(args, view(segments), view(s.grad), view(s.main), view(s.m), view(s.v), view(s.model, DType::bf16),
                    Stream());
        }
      };
      run(factor_args, by_factor, low_by_factor);
      const std::string what = std::string(remainders ? "remainders" : "fp32 main weights") + " skip " +
                               std::to_string(static_cast<int>(skip));
      if (skip != 0.0f) {
        for (std::size_t i = 0; i < kShard; ++i) {
          EXPECT_EQ(bits_of(by_factor.main[i]), bits_of(before.main[i])) << what << " " << i;
          EXPECT_EQ(bits_of(by_factor.m[i]), bits_of(before.m[i])) << what << " " << i;
          EXPECT_EQ(bits_of(by_factor.v[i]), bits_of(before.v[i])) << what << " " << i;
          EXPECT_EQ(by_factor.model[i], before.model[i]) << what << " " << i;
          EXPECT_EQ(low_by_factor[i], 0) << what << " " << i;
        }
        continue;
      }
      run(value_args, by_value, low_by_value);
      int changed = 0;
      for (std::size_t i = 0; i < kShard; ++i) {
        EXPECT_EQ(bits_of(by_factor.main[i]), bits_of(by_value.main[i])) << what << " " << i;
        EXPECT_EQ(bits_of(by_factor.m[i]), bits_of(by_value.m[i])) << what << " " << i;
        EXPECT_EQ(bits_of(by_factor.v[i]), bits_of(by_value.v[i])) << what << " " << i;
        EXPECT_EQ(by_factor.model[i], by_value.model[i]) << what << " " << i;
        EXPECT_EQ(low_by_factor[i], low_by_value[i]) << what << " " << i;
        changed += by_factor.m[i] != before.m[i] ? 1 : 0;
      }
      EXPECT_EQ(changed, 10) << what;  // every element but the two of padding
    }
  }
}

TEST(AdamKernel, RejectsAStepFactorOfOtherThanTwoFp32) {
  KernelState s = initial_kernel_state();
  std::vector<std::int64_t> segments = kSegments;
  std::vector<float> three = {1.0f, 0.0f, 0.0f};
  AdamArgs args = test_args(true);
  args.step = 1;
  args.step_factor = view(three);
  try {
    adam_step(args, view(segments), view(s.grad), view(s.main), view(s.m), view(s.v), view(s.model, DType::bf16),
              Stream());
    FAIL() << "a step factor of 3 elements was taken";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("step_factor"), std::string::npos) << e.what();
  }
}

// The factor against its closed form: grad_scale / loss_scale, times clip_val / (norm + 1e-6) where that is
// below 1, norm = sqrt(squared) * grad_scale / loss_scale; a non-finite norm skips.
TEST(StepFactor, MatchesTheClosedFormClipsAndSkips) {
  struct Case {
    double squared, grad_scale, loss_scale, clip;
    float scale;
    float skip;
  };
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Case cases[] = {
      {4.0, 0.5, 1.0, 0.0, 0.5f, 0.0f},                                               // norm 1, no clipping
      {4.0, 0.5, 1.0, 2.0, 0.5f, 0.0f},                                               // norm 1 under the clip
      {400.0, 0.5, 1.0, 1.0, static_cast<float>(0.5 * (1.0 / (10.0 + 1e-6))), 0.0f},  // norm 10 clipped to 1
      {65536.0 * 65536.0 * 9.0, 1.0, 65536.0, 1.0, static_cast<float>(1.0 / 65536.0 * (1.0 / (3.0 + 1e-6))),
       0.0f},  // unscaled norm 3
      {inf, 0.5, 1.0, 1.0, 0.5f, 1.0f},
      {nan, 0.5, 1.0, 0.0, 0.5f, 1.0f},
  };
  for (const Case& c : cases) {
    double squared = c.squared;
    std::vector<float> factor = {-1.0f, -1.0f};
    resolve_step_factor(Tensor::flat(&squared, DType::f64, Device::cpu(), 1), {c.grad_scale, c.loss_scale, c.clip},
                        view(factor), Stream());
    EXPECT_EQ(factor[1], c.skip) << c.squared;
    if (c.skip == 0.0f) {
      EXPECT_EQ(bits_of(factor[0]), bits_of(c.scale)) << c.squared;
    }
    const StepFactor host = step_factor_of(c.squared, {c.grad_scale, c.loss_scale, c.clip});
    EXPECT_EQ(host.finite, c.skip == 0.0f) << c.squared;
    EXPECT_EQ(bits_of(host.adam_grad_scale), bits_of(factor[0])) << c.squared;
  }
}

TEST(SquaredNorm, MatchesDirectSumAndIgnoresElementsOutsideSegments) {
  kernels::Workspace workspace(Stream(), testing::all_workspace_needs());
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  const std::size_t n = 100003;
  std::vector<float> x(n);
  for (auto& value : x) value = normal(rng);
  std::vector<std::int64_t> segments = {5, 20000, 1, 20000, 20001, 0, 20100, 99999, 0};
  long double direct = 0;
  for (std::size_t s = 0; s < segments.size(); s += 3) {
    for (auto i = segments[s]; i < segments[s + 1]; ++i) direct += static_cast<long double>(x[i]) * x[i];
  }
  x[0] = x[20050] = x[100002] = 1e30f;  // outside every segment
  std::vector<double> out = {0.0};
  squared_norm(view(x), view(segments), view(out), false, workspace, Stream());
  EXPECT_NEAR(out[0], static_cast<double>(direct), static_cast<double>(direct) * 1e-13);

  // accumulate adds to the old value.
  std::vector<double> accumulated = {1000.0};
  squared_norm(view(x), view(segments), view(accumulated), true, workspace, Stream());
  EXPECT_NEAR(accumulated[0], static_cast<double>(direct) + 1000.0, (static_cast<double>(direct) + 1000) * 1e-13);

  // bf16 input: the sum of the bf16 values.
  std::vector<std::uint16_t> x_bf16(n);
  long double direct_bf16 = 0;
  for (std::size_t i = 0; i < n; ++i) x_bf16[i] = f32_to_bf16(x[i]);
  for (std::size_t s = 0; s < segments.size(); s += 3) {
    for (auto i = segments[s]; i < segments[s + 1]; ++i) {
      direct_bf16 += static_cast<long double>(bf16_to_f32(x_bf16[i])) * bf16_to_f32(x_bf16[i]);
    }
  }
  squared_norm(view(x_bf16, DType::bf16), view(segments), view(out), false, workspace, Stream());
  EXPECT_NEAR(out[0], static_cast<double>(direct_bf16), static_cast<double>(direct_bf16) * 1e-13);

  std::vector<std::int64_t> no_segments;
  std::vector<double> untouched = {7.5};
  squared_norm(view(x), view(no_segments), view(untouched), true, workspace, Stream());
  EXPECT_EQ(untouched[0], 7.5);
  squared_norm(view(x), view(no_segments), view(untouched), false, workspace, Stream());
  EXPECT_EQ(untouched[0], 0.0);
}

TEST(SquaredNorm, IsIndependentOfThreadCount) {
  kernels::Workspace workspace(Stream(), testing::all_workspace_needs());
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> uniform(-3.0f, 3.0f);
  std::vector<float> x(3000001);
  for (auto& value : x) value = uniform(rng);
  std::vector<std::int64_t> segments = {0, 1234567, 1, 1234600, 3000001, 0};
  std::vector<double> one = {0.0}, many = {0.0};
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  squared_norm(view(x), view(segments), view(one), false, workspace, Stream());
  omp_set_num_threads(7);
  squared_norm(view(x), view(segments), view(many), false, workspace, Stream());
  omp_set_num_threads(saved);
  EXPECT_EQ(one[0], many[0]);
}

// The optimizers add the buckets of a rank (accumulate) and the ranks (an fp64 all-reduce) in
// fp64 and round once, so a sum split into parts agrees with the sum in one piece to fp64
// precision, far below one fp32 ulp: split sums give the same fp32 norm as fused_adam's one sum.
TEST(SquaredNorm, PartsAddedInFp64AgreeWithTheWholeFarBelowAnFp32Ulp) {
  kernels::Workspace workspace(Stream(), testing::all_workspace_needs());
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 0.01f);
  std::vector<float> x(1'000'003);
  for (auto& value : x) value = normal(rng);
  std::vector<std::int64_t> whole = {0, static_cast<std::int64_t>(x.size()), 1};
  std::vector<double> one = {0.0};
  squared_norm(view(x), view(whole), view(one), false, workspace, Stream());
  // Three "buckets" on one "rank", two on another: accumulated, then the two rank sums added.
  std::vector<std::int64_t> rank0_parts[] = {{0, 300000, 1}, {300000, 300001, 0}, {300001, 500000, 1}};
  std::vector<std::int64_t> rank1_parts[] = {{500000, 777777, 0}, {777777, 1'000'003, 1}};
  std::vector<double> rank0 = {0.0}, rank1 = {0.0};
  for (std::size_t b = 0; b < 3; ++b)
    squared_norm(view(x), view(rank0_parts[b]), view(rank0), b > 0, workspace, Stream());
  for (std::size_t b = 0; b < 2; ++b)
    squared_norm(view(x), view(rank1_parts[b]), view(rank1), b > 0, workspace, Stream());
  const double split = rank0[0] + rank1[0];
  EXPECT_NEAR(split, one[0], 1e-14 * one[0]);
  // What an fp32 round after every part (the former accumulation) loses: typically an ulp or more.
  EXPECT_EQ(static_cast<float>(split), static_cast<float>(one[0]));
}

TEST(SquaredNorm, NonFiniteInputGivesNonFiniteResult) {
  kernels::Workspace workspace(Stream(), testing::all_workspace_needs());
  std::vector<float> x = {1.0f, 2.0f, std::numeric_limits<float>::infinity(), 3.0f};
  std::vector<std::int64_t> segments = {0, 4, 1};
  std::vector<double> out = {0.0};
  squared_norm(view(x), view(segments), view(out), false, workspace, Stream());
  EXPECT_TRUE(std::isinf(out[0]));
  x[2] = std::numeric_limits<float>::quiet_NaN();
  squared_norm(view(x), view(segments), view(out), false, workspace, Stream());
  EXPECT_TRUE(std::isnan(out[0]));
}

std::vector<float> cast_test_values() {
  std::vector<float> values = {0.0f,
                               -0.0f,
                               1.0f,
                               -1.00390625f,
                               1.01171875f,
                               65504.0f,
                               65520.0f,
                               1e6f,
                               5.96e-8f,
                               1e-40f,
                               std::numeric_limits<float>::infinity(),
                               -std::numeric_limits<float>::infinity(),
                               std::numeric_limits<float>::quiet_NaN(),
                               3.0e38f};
  std::mt19937 rng(1);
  std::uniform_int_distribution<std::uint32_t> any_bits;
  for (int i = 0; i < 20000; ++i) values.push_back(std::bit_cast<float>(any_bits(rng)));
  return values;
}

bool same_half(std::uint16_t a, std::uint16_t b, bool is_bf16) {
  const auto is_nan = [&](std::uint16_t h) { return is_bf16 ? std::isnan(bf16_to_f32(h)) : std::isnan(f16_to_f32(h)); };
  return a == b || (is_nan(a) && is_nan(b));
}

TEST(Cast, MatchesCoreHalfConversions) {
  std::vector<float> f32 = cast_test_values();
  const std::size_t n = f32.size();
  std::vector<std::uint16_t> bf16(n), f16(n), f16_from_bf16(n), bf16_from_f16(n);
  std::vector<float> back(n);
  cast(view(f32), view(bf16, DType::bf16), Stream());
  cast(view(f32), view(f16, DType::f16), Stream());
  cast(view(bf16, DType::bf16), view(f16_from_bf16, DType::f16), Stream());
  cast(view(f16, DType::f16), view(bf16_from_f16, DType::bf16), Stream());
  for (std::size_t i = 0; i < n; ++i) {
    ASSERT_TRUE(same_half(bf16[i], f32_to_bf16(f32[i]), true)) << i;
    ASSERT_TRUE(same_half(f16[i], f32_to_f16(f32[i]), false)) << i;
    ASSERT_TRUE(same_half(f16_from_bf16[i], f32_to_f16(bf16_to_f32(bf16[i])), false)) << i;
    ASSERT_TRUE(same_half(bf16_from_f16[i], f32_to_bf16(f16_to_f32(f16[i])), true)) << i;
  }
  cast(view(bf16, DType::bf16), view(back), Stream());
  for (std::size_t i = 0; i < n; ++i) {
    if (!std::isnan(back[i])) {
      ASSERT_EQ(bits_of(back[i]), bits_of(bf16_to_f32(bf16[i]))) << i;
    }
  }
  cast(view(f16, DType::f16), view(back), Stream());
  for (std::size_t i = 0; i < n; ++i) {
    if (!std::isnan(back[i])) {
      ASSERT_EQ(bits_of(back[i]), bits_of(f16_to_f32(f16[i]))) << i;
    }
  }
  std::vector<float> copy(n);
  cast(view(f32), view(copy), Stream());
  EXPECT_EQ(std::memcmp(copy.data(), f32.data(), n * sizeof(float)), 0);
  std::vector<float> too_short(n - 1);
  EXPECT_THROW(cast(view(f32), view(too_short), Stream()), Error);
}

TEST(Elementwise, ScaleAccumulateFillZero) {
  std::vector<float> x = {1.5f, -2.0f, 3.25f, 1e-3f};
  std::vector<float> expected_scaled(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) expected_scaled[i] = x[i] * 0.3f;
  scale(view(x), 0.3f, Stream());
  for (std::size_t i = 0; i < x.size(); ++i) EXPECT_EQ(bits_of(x[i]), bits_of(expected_scaled[i]));

  std::vector<std::uint16_t> h = {f32_to_bf16(1.5f), f32_to_bf16(-7.0f), f32_to_bf16(0.1f)};
  std::vector<std::uint16_t> expected_h(h.size());
  for (std::size_t i = 0; i < h.size(); ++i) expected_h[i] = f32_to_bf16(bf16_to_f32(h[i]) * 0.3f);
  scale(view(h, DType::bf16), 0.3f, Stream());
  EXPECT_EQ(h, expected_h);
  std::vector<std::uint16_t> f16 = {f32_to_f16(1.5f), f32_to_f16(-7.0f), f32_to_f16(0.1f)};
  for (std::size_t i = 0; i < f16.size(); ++i) expected_h[i] = f32_to_f16(f16_to_f32(f16[i]) * 0.3f);
  scale(view(f16, DType::f16), 0.3f, Stream());
  EXPECT_EQ(f16, expected_h);

  std::vector<float> dst = {1.0f, 2.0f, 3.0f};
  std::vector<float> src = {0.5f, 0.25f, -3.0f};
  accumulate(view(src), view(dst), Stream());
  EXPECT_EQ(dst, (std::vector<float>{1.5f, 2.25f, 0.0f}));
  std::vector<std::uint16_t> src_bf16 = {f32_to_bf16(0.1f), f32_to_bf16(2.0f), f32_to_bf16(-1.0f)};
  accumulate(view(src_bf16, DType::bf16), view(dst), Stream());
  EXPECT_EQ(dst, (std::vector<float>{1.5f + bf16_to_f32(src_bf16[0]), 4.25f, -1.0f}));
  // fp32 into a bf16 gradient buffer: each sum rounded once, to nearest (bf16 steps by 2^-7 in [1, 2)).
  std::vector<std::uint16_t> dst_bf16 = {f32_to_bf16(1.0f), f32_to_bf16(1.0f), f32_to_bf16(-2.0f)};
  std::vector<float> small = {0x1p-9f, 3 * 0x1p-9f, 0x1p-7f};
  accumulate(view(small), view(dst_bf16, DType::bf16), Stream());
  EXPECT_EQ(dst_bf16,
            (std::vector<std::uint16_t>{f32_to_bf16(1.0f), f32_to_bf16(1.0078125f), f32_to_bf16(-1.9921875f)}));
  EXPECT_THROW(accumulate(view(src_bf16, DType::bf16), view(dst_bf16, DType::bf16), Stream()), Error);

  fill_zero(view(dst), Stream());
  EXPECT_EQ(dst, (std::vector<float>{0.0f, 0.0f, 0.0f}));
  fill_zero(view(h, DType::bf16), Stream());
  EXPECT_EQ(h, (std::vector<std::uint16_t>{0, 0, 0}));
}

}  // namespace
}  // namespace adamant::kernels
