// The up projection and GELU as one call (kernels/linear_gelu.h) on the GPU against a closed
// form in double: the tanh form runs in cuBLASLt's GELU_AUX_BIAS and DGELU epilogues, the exact
// form as the product and our GELU kernels. Inputs are bf16 values; the expected results are
// computed from them exactly (sums in double) and compared element by element with the
// tolerances of cuda_linear_test.cpp: half a bf16 ulp of rounding (2^-8 allowed) plus 1e-4 of
// the product's magnitude for the order of fp32 sums, that magnitude scaled by GELU's largest
// slope (1.13; 1.2 allowed). Where the separate kernels round an intermediate (the
// pre-activation, the product before the GELU backward) its rounding joins the magnitude term.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "adamant/kernels/linear_gelu.h"
#include "kernels/cuda_linear_test_util.h"
#include "kernels/cuda_test_util.h"
#include "workspace_test_util.h"

namespace adamant::kernels {
namespace {

using testing::DeviceMatrix;
using testing::expect_close;
using testing::kAccumulation;
using testing::kBf16OutputRelative;
using testing::random_values;

constexpr double kSlope = 1.2;  // bounds |gelu'| (1.13 at its peak) in both forms
// The epilogue may evaluate tanh by the hardware's approximation (about 2^-11 relative): an
// error of up to 2^-10 in tanh moves gelu(x) by |x| 2^-11 and gelu'(x) by at most
// 2^-10 (1 + |x| (1 + 0.134 x^2)). A wrong operand, bias or aux matrix moves them by their size.
constexpr double kTanhError = 1.0 / 1024;

double gelu(double x, GeluForm form) {
  if (form == GeluForm::exact) return 0.5 * x * std::erfc(-x / std::sqrt(2.0));
  const double inner = std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x);
  return 0.5 * x * (1.0 + std::tanh(inner));
}

double gelu_slope(double x, GeluForm form) {
  if (form == GeluForm::exact)
    return 0.5 * std::erfc(-x / std::sqrt(2.0)) + x * std::exp(-0.5 * x * x) / std::sqrt(2.0 * M_PI);
  const double s = std::sqrt(2.0 / M_PI), t = std::tanh(s * (x + 0.044715 * x * x * x));
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * s * (1.0 + 3.0 * 0.044715 * x * x);
}

std::vector<float> nans(std::size_t n) { return std::vector<float>(n, std::numeric_limits<float>::quiet_NaN()); }

const char* name_of(GeluForm form) { return form == GeluForm::tanh ? "tanh" : "exact"; }

std::string describe(const LinearShape& s, GeluForm form) {
  return std::to_string(s.rows) + " rows, " + std::to_string(s.in_features) + " -> " + std::to_string(s.out_features) +
         ", " + name_of(form) + " GELU";
}

void check_forward(const LinearShape& s, GeluForm form, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const auto in = random_values(s.rows * s.in_features, rng, 1.0f, true);
  const auto weight = random_values(s.out_features * s.in_features, rng, 0.05f, true);
  const auto bias = random_values(s.out_features, rng, 0.5f, true);
  const std::size_t outputs = static_cast<std::size_t>(s.rows * s.out_features);
  std::vector<float> pre(outputs), out(outputs), magnitude(outputs), out_magnitude(outputs);
  for (std::int64_t r = 0; r < s.rows; ++r) {
    for (std::int64_t j = 0; j < s.out_features; ++j) {
      double sum = bias[j], abs_sum = std::abs(bias[j]);
      for (std::int64_t k = 0; k < s.in_features; ++k) {
        const double product = static_cast<double>(in[r * s.in_features + k]) * weight[j * s.in_features + k];
        sum += product;
        abs_sum += std::abs(product);
      }
      const std::size_t at = static_cast<std::size_t>(r * s.out_features + j);
      pre[at] = static_cast<float>(sum);
      out[at] = static_cast<float>(gelu(sum, form));
      magnitude[at] = static_cast<float>(abs_sum);
      // The exact form's GELU reads the pre-activation rounded to bf16; the epilogue's tanh may be approximate.
      const double rounding = form == GeluForm::exact ? kBf16OutputRelative * std::abs(sum) / kAccumulation
                                                      : 0.5 * kTanhError * std::abs(sum) / kAccumulation;
      out_magnitude[at] = static_cast<float>(kSlope * (abs_sum + rounding));
    }
  }
  DeviceMatrix in_gpu(in, DType::bf16), weight_gpu(weight, DType::bf16), bias_gpu(bias, DType::bf16);
  DeviceMatrix pre_gpu(nans(outputs), DType::bf16), out_gpu(nans(outputs), DType::bf16);
  Stream stream(testing::gpu());
  Workspace workspace(stream, testing::all_workspace_needs());
  linear_gelu_forward(in_gpu.view(), weight_gpu.view(), bias_gpu.view(), pre_gpu.view(), out_gpu.view(), s, form,
                      workspace, stream);
  stream.synchronize();
  expect_close(pre_gpu.download(), pre, magnitude, kBf16OutputRelative, kAccumulation,
               "linear_gelu_forward pre-activation, " + describe(s, form));
  expect_close(out_gpu.download(), out, out_magnitude, kBf16OutputRelative, kAccumulation,
               "linear_gelu_forward out, " + describe(s, form));
}

// `s` is the layer after the GELU: its in_features are the GELU's width.
void check_backward(const LinearShape& s, GeluForm form, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const auto d_out = random_values(s.rows * s.out_features, rng, 1e-2f, true);
  const auto weight = random_values(s.out_features * s.in_features, rng, 0.05f, true);
  const auto pre = random_values(s.rows * s.in_features, rng, 1.5f, true);
  const std::size_t inputs = static_cast<std::size_t>(s.rows * s.in_features);
  std::vector<float> d_pre(inputs), magnitude(inputs);
  for (std::int64_t r = 0; r < s.rows; ++r) {
    for (std::int64_t j = 0; j < s.in_features; ++j) {
      double sum = 0, abs_sum = 0;
      for (std::int64_t c = 0; c < s.out_features; ++c) {
        const double product = static_cast<double>(d_out[r * s.out_features + c]) * weight[c * s.in_features + j];
        sum += product;
        abs_sum += std::abs(product);
      }
      const std::size_t at = static_cast<std::size_t>(r * s.in_features + j);
      d_pre[at] = static_cast<float>(sum * gelu_slope(pre[at], form));
      // The exact form's GELU backward reads the product rounded to bf16; the epilogue's tanh may be approximate.
      const double x = std::abs(pre[at]);
      const double rounding = form == GeluForm::exact
                                  ? kBf16OutputRelative * std::abs(sum) / kAccumulation
                                  : kTanhError * (1.0 + x * (1.0 + 0.134 * x * x)) * std::abs(sum) / kAccumulation;
      magnitude[at] = static_cast<float>(kSlope * (abs_sum + rounding));
    }
  }
  DeviceMatrix d_out_gpu(d_out, DType::bf16), weight_gpu(weight, DType::bf16), pre_gpu(pre, DType::bf16);
  DeviceMatrix d_pre_gpu(nans(inputs), DType::bf16);
  Stream stream(testing::gpu());
  Workspace workspace(stream, testing::all_workspace_needs());
  linear_dgelu_backward(d_out_gpu.view(), weight_gpu.view(), pre_gpu.view(), d_pre_gpu.view(), s, form, workspace,
                        stream);
  stream.synchronize();
  // cuBLASLt's DGELU lands within one bf16 ulp rather than half (on an H200 3 of 49,152
  // elements were up to 1.06 times the half-ulp tolerance).
  const double relative = form == GeluForm::tanh ? 2 * kBf16OutputRelative : kBf16OutputRelative;
  expect_close(d_pre_gpu.download(), d_pre, magnitude, relative, kAccumulation,
               "linear_dgelu_backward d_pre_activation, " + describe(s, form));
  const auto untouched = pre_gpu.download();
  EXPECT_EQ(untouched, pre) << "the pre-activation is read only";
}

TEST(CudaLinearGelu, ForwardMatchesTheClosedFormInBothForms) {
  ADAMANT_REQUIRE_GPU();
  std::uint64_t seed = 1;
  for (const GeluForm form : {GeluForm::tanh, GeluForm::exact}) {
    check_forward({96, 128, 512}, form, seed++);
    check_forward({200, 256, 1024}, form, seed++);  // 126M's ratio of widths, fewer rows
  }
}

TEST(CudaLinearGelu, BackwardMatchesTheClosedFormInBothForms) {
  ADAMANT_REQUIRE_GPU();
  std::uint64_t seed = 11;
  for (const GeluForm form : {GeluForm::tanh, GeluForm::exact}) {
    check_backward({96, 512, 128}, form, seed++);
    check_backward({200, 1024, 256}, form, seed++);
  }
}

// The epilogue's results do not depend on the run: the same inputs give the same bits.
TEST(CudaLinearGelu, EpiloguesAreRepeatable) {
  ADAMANT_REQUIRE_GPU();
  const LinearShape s{128, 256, 1024};
  std::mt19937_64 rng(21);
  const auto in = random_values(s.rows * s.in_features, rng, 1.0f, true);
  const auto weight = random_values(s.out_features * s.in_features, rng, 0.05f, true);
  const auto bias = random_values(s.out_features, rng, 0.5f, true);
  const std::size_t outputs = static_cast<std::size_t>(s.rows * s.out_features);
  DeviceMatrix in_gpu(in, DType::bf16), weight_gpu(weight, DType::bf16), bias_gpu(bias, DType::bf16);
  DeviceMatrix pre_gpu(nans(outputs), DType::bf16), out_gpu(nans(outputs), DType::bf16);
  DeviceMatrix d_in_gpu(nans(static_cast<std::size_t>(s.rows * s.in_features)), DType::bf16);
  Stream stream(testing::gpu());
  Workspace workspace(stream, testing::all_workspace_needs());
  std::vector<std::vector<float>> runs;
  for (int run = 0; run < 2; ++run) {
    linear_gelu_forward(in_gpu.view(), weight_gpu.view(), bias_gpu.view(), pre_gpu.view(), out_gpu.view(), s,
                        GeluForm::tanh, workspace, stream);
    // The GELU output taken back through the same layer's weights as the next layer's gradient.
    linear_dgelu_backward(out_gpu.view(), weight_gpu.view(), in_gpu.view(), d_in_gpu.view(),
                          {s.rows, s.in_features, s.out_features}, GeluForm::tanh, workspace, stream);
    stream.synchronize();
    runs.push_back(out_gpu.download());
    const auto d_in = d_in_gpu.download();
    runs.back().insert(runs.back().end(), d_in.begin(), d_in.end());
  }
  ASSERT_EQ(runs[0].size(), runs[1].size());
  for (std::size_t i = 0; i < runs[0].size(); ++i) ASSERT_EQ(runs[0][i], runs[1][i]) << i;
}

}  // namespace
}  // namespace adamant::kernels
