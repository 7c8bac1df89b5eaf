// CUDA GEMM (cuBLASLt) and linear layer against the CPU reference kernels: random
// inputs rounded to bf16, the CPU kernel in fp32 on the rounded values, the GPU
// kernel on their bf16 copies (or on fp32 copies for the fp32 path).
//
// Tolerances, per element: |gpu - cpu| <= relative * |cpu| + accumulation * magnitude,
// where magnitude is the same product on absolute values (|alpha| |op(a)| |op(b)| +
// |beta| |c|, computed by the CPU kernel). Products of bf16 values are exact in fp32,
// so the only differences are the order of the fp32 sums (accumulation 1e-4 of the
// magnitude covers any order for these k) and, for a bf16 output, its rounding (half
// a bf16 ulp, 2^-9 relative; we allow 2^-8; with beta != 0 a second rounding of the
// product, see check_gemm). A wrong transpose, stride or epilogue
// gives differences of the order of the magnitude itself.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "adamant/core/half.h"
#include "adamant/kernels/cpu/model_kernels_cpu.h"
#include "adamant/kernels/cuda/column_sums.h"
#include "adamant/kernels/linear.h"
#include "kernels/cuda_linear_test_util.h"
#include "kernels/cuda_test_util.h"
#include "workspace_test_util.h"

namespace adamant::kernels {
namespace {

using testing::absolute;
using testing::DeviceMatrix;
using testing::expect_close;
using testing::kAccumulation;
using testing::kBf16OutputRelative;
using testing::MirroredArray;
using testing::random_values;

enum class Precision { bf16_to_bf16, bf16_to_f32, f32_to_f32 };

const char* name_of(Precision p) {
  switch (p) {
    case Precision::bf16_to_bf16:
      return "bf16->bf16";
    case Precision::bf16_to_f32:
      return "bf16->fp32";
    case Precision::f32_to_f32:
      return "fp32->fp32";
  }
  return "?";
}

struct GemmCase {
  std::int64_t m, n, k;
  float alpha, beta;
  std::size_t a_offset;  // elements: 1 makes a bf16 operand only 2-byte aligned
};

void check_gemm(Precision precision, Transpose ta, Transpose tb, const GemmCase& c, std::uint64_t seed) {
  const DType in_dtype = precision == Precision::f32_to_f32 ? DType::f32 : DType::bf16;
  const DType out_dtype = precision == Precision::bf16_to_bf16 ? DType::bf16 : DType::f32;
  std::mt19937_64 rng(seed);
  const auto a = random_values(c.m * c.k, rng, 1.0f, in_dtype == DType::bf16);
  const auto b = random_values(c.k * c.n, rng, 1.0f, in_dtype == DType::bf16);
  auto c0 = random_values(c.m * c.n, rng, 1.0f, out_dtype == DType::bf16);
  if (c.beta == 0.0f) c0.assign(c0.size(), std::numeric_limits<float>::quiet_NaN());  // beta 0 must ignore c

  std::vector<float> expected = c0, magnitude(c0.size(), 0.0f);
  cpu::gemm<float>(ta, tb, c.m, c.n, c.k, c.alpha, a.data(), b.data(), c.beta, expected.data());
  const auto abs_a = absolute(a), abs_b = absolute(b);
  if (c.beta != 0.0f) magnitude = absolute(c0);
  cpu::gemm<float>(ta, tb, c.m, c.n, c.k, std::abs(c.alpha), abs_a.data(), abs_b.data(), std::abs(c.beta),
                   magnitude.data());

  DeviceMatrix a_gpu(a, in_dtype, c.a_offset), b_gpu(b, in_dtype), c_gpu(c0, out_dtype);
  Stream stream(testing::gpu());
  kernels::Workspace workspace(stream, testing::all_workspace_needs());
  cuda::gemm(ta, tb, c.m, c.n, c.k, c.alpha, a_gpu.view(), b_gpu.view(), c.beta, c_gpu.view(), workspace, stream);
  stream.synchronize();
  const std::string what = std::string("gemm ") + name_of(precision) + " ta " + std::to_string(ta == Transpose::yes) +
                           " tb " + std::to_string(tb == Transpose::yes) + " " + std::to_string(c.m) + "x" +
                           std::to_string(c.n) + "x" + std::to_string(c.k) + " beta " + std::to_string(c.beta) +
                           " a offset " + std::to_string(c.a_offset);
  // With a bf16 output and beta != 0, cuBLASLt rounds alpha * op(a) op(b) to bf16 before adding
  // beta * c and rounds again (seen on H200): the first rounding is relative to the product's
  // magnitude, not to the result's, so it joins the magnitude term.
  const bool two_roundings = out_dtype == DType::bf16 && c.beta != 0.0;
  expect_close(c_gpu.download(), expected, magnitude, out_dtype == DType::bf16 ? kBf16OutputRelative : 1e-6,
               kAccumulation + (two_roundings ? kBf16OutputRelative : 0.0), what);
}

TEST(CudaGemm, AllTransposesAndPrecisionsMatchTheCpu) {
  ADAMANT_REQUIRE_GPU();
  const std::vector<GemmCase> cases = {
      {37, 53, 29, 0.75f, 0.0f, 0},    // odd sizes: no vector-friendly dimension
      {37, 53, 29, 1.0f, -0.5f, 0},    // beta != 0 reads c
      {64, 2304, 768, 1.0f, 0.0f, 0},  // GPT-3 126M: the qkv projection of 64 tokens
      {48, 2048, 512, 1.0f, 1.0f, 0},  // 1.3B hidden size, accumulation onto c
  };
  std::uint64_t seed = 1;
  for (const Precision precision : {Precision::bf16_to_bf16, Precision::bf16_to_f32, Precision::f32_to_f32}) {
    for (const Transpose ta : {Transpose::no, Transpose::yes}) {
      for (const Transpose tb : {Transpose::no, Transpose::yes}) {
        for (const GemmCase& c : cases) check_gemm(precision, ta, tb, c, seed++);
      }
    }
  }
}

TEST(CudaGemm, UnalignedOperands) {
  ADAMANT_REQUIRE_GPU();
  // A bf16 operand one element off its allocation's alignment (2-byte aligned): the
  // plan cache must pick an algorithm that allows it.
  check_gemm(Precision::bf16_to_bf16, Transpose::no, Transpose::yes, {33, 40, 24, 1.0f, 0.0f, 1}, 100);
  check_gemm(Precision::bf16_to_f32, Transpose::yes, Transpose::no, {40, 33, 24, 1.0f, 1.0f, 1}, 101);
}

TEST(CudaGemm, EmptyInnerDimensionScalesTheOutput) {
  ADAMANT_REQUIRE_GPU();
  // k = 0: c = beta * c, and beta = 0 clears c (NaN included).
  MirroredArray<float> unused(1, DType::f32);
  const Tensor empty_a = Tensor::flat(unused.device_view().data, DType::f32, testing::gpu(), 0);
  Stream stream(testing::gpu());
  kernels::Workspace workspace(stream, testing::all_workspace_needs());
  for (const float beta : {0.5f, 0.0f}) {
    MirroredArray<float> c(35, DType::f32);
    for (std::size_t i = 0; i < c.host.size(); ++i) c.host[i] = beta == 0.0f ? std::nanf("") : 0.25f * i - 3.0f;
    c.upload();
    cuda::gemm(Transpose::no, Transpose::no, 5, 7, 0, 1.0, empty_a, empty_a, beta, c.device_view(), workspace, stream);
    stream.synchronize();
    const auto result = c.download();
    for (std::size_t i = 0; i < result.size(); ++i) {
      ASSERT_EQ(result[i], beta * (beta == 0.0f ? 0.0f : c.host[i])) << "beta " << beta << " at " << i;
    }
  }
}

TEST(CudaGemm, RepeatedCallsReuseTheirPlanAndStayCorrect) {
  ADAMANT_REQUIRE_GPU();
  // The second call of a shape runs on the cached plan (with other pointers).
  for (int repeat = 0; repeat < 3; ++repeat) {
    check_gemm(Precision::bf16_to_bf16, Transpose::no, Transpose::yes, {64, 96, 128, 1.0f, 0.0f, 0}, 200 + repeat);
  }
}

TEST(CudaGemm, RejectsMixedInputDtypes) {
  ADAMANT_REQUIRE_GPU();
  std::mt19937_64 rng(5);
  const auto values = random_values(16, rng, 1.0f, true);
  DeviceMatrix a(values, DType::bf16), b(values, DType::f32), c(values, DType::f32);
  Stream stream(testing::gpu());
  kernels::Workspace workspace(stream, testing::all_workspace_needs());
  EXPECT_THROW(
      cuda::gemm(Transpose::no, Transpose::no, 4, 4, 4, 1.0, a.view(), b.view(), 0.0, c.view(), workspace, stream),
      Error);
}

// A workspace serves the stream it was made for: a product enqueued on another stream
// (whose kernels could overlap this one's in the same cuBLASLt workspace) is refused.
TEST(CudaGemm, RefusesTheWorkspaceOfAnotherStream) {
  ADAMANT_REQUIRE_GPU();
  std::mt19937_64 rng(6);
  const auto values = random_values(16, rng, 1.0f, true);
  DeviceMatrix a(values, DType::f32), b(values, DType::f32), c(values, DType::f32);
  Stream first(testing::gpu()), second(testing::gpu());
  kernels::Workspace workspace(first, testing::all_workspace_needs());
  try {
    gemm(Transpose::no, Transpose::no, 4, 4, 4, 1.0, a.view(), b.view(), 0.0, c.view(), workspace, second);
    FAIL() << "the workspace of another stream was accepted";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("made for another stream"), std::string::npos) << error.what();
  }
  gemm(Transpose::no, Transpose::no, 4, 4, 4, 1.0, a.view(), b.view(), 0.0, c.view(), workspace, first);
  first.synchronize();
}

struct LinearCase {
  LinearShape shape;
  DType dtype;
  bool with_d_in;
  bool with_bias = true;  // false: empty bias and d_bias (the default epilogue, no bias gradient)
};

std::string describe(const LinearCase& c) {
  return std::to_string(c.shape.rows) + " rows, " + std::to_string(c.shape.in_features) + " -> " +
         std::to_string(c.shape.out_features) + ", " + std::string(dtype_name(c.dtype)) +
         (c.with_bias ? "" : ", no bias");
}

void check_linear(const LinearCase& c, std::uint64_t seed) {
  const LinearShape& s = c.shape;
  const bool round = c.dtype == DType::bf16;
  std::mt19937_64 rng(seed);
  const auto in = random_values(s.rows * s.in_features, rng, 1.0f, round);
  const auto weight = random_values(s.out_features * s.in_features, rng, 0.02f, round);
  const auto bias = random_values(s.out_features, rng, 0.5f, round);
  const auto d_out = random_values(s.rows * s.out_features, rng, 1e-3f, round);
  auto host = [](std::vector<float>& v) { return Tensor::flat(v.data(), DType::f32, Device::cpu(), v.size()); };

  // CPU reference and magnitudes (the same kernels on absolute values).
  std::vector<float> in_c = in, weight_c = weight, bias_c = bias, d_out_c = d_out;
  std::vector<float> out(s.rows * s.out_features), d_in(s.rows * s.in_features),
      d_weight(s.out_features * s.in_features), d_bias(s.out_features);
  // Without a bias, the CPU kernels run without one too: the reference is then in[rows, in] weight^T.
  auto optional = [&](std::vector<float>& v) { return c.with_bias ? host(v) : Tensor{}; };
  cpu::linear_forward(host(in_c), host(weight_c), optional(bias_c), host(out), s);
  cpu::linear_backward(host(d_out_c), host(in_c), host(weight_c), host(d_in), host(d_weight), optional(d_bias), s,
                       WeightGrad::overwrite, Tensor{});
  auto abs_in = absolute(in), abs_weight = absolute(weight), abs_bias = absolute(bias), abs_d_out = absolute(d_out);
  std::vector<float> out_mag(out.size()), d_in_mag(d_in.size()), d_weight_mag(d_weight.size()),
      d_bias_mag(d_bias.size());
  cpu::linear_forward(host(abs_in), host(abs_weight), optional(abs_bias), host(out_mag), s);
  cpu::linear_backward(host(abs_d_out), host(abs_in), host(abs_weight), host(d_in_mag), host(d_weight_mag),
                       optional(d_bias_mag), s, WeightGrad::overwrite, Tensor{});

  const std::vector<float> poison_activation(d_in.size(), std::numeric_limits<float>::quiet_NaN());
  const std::vector<float> poison_weight(d_weight.size(), std::numeric_limits<float>::quiet_NaN());
  const std::vector<float> poison_bias(d_bias.size(), std::numeric_limits<float>::quiet_NaN());
  DeviceMatrix in_gpu(in, c.dtype), weight_gpu(weight, c.dtype), bias_gpu(bias, c.dtype), d_out_gpu(d_out, c.dtype);
  DeviceMatrix out_gpu(std::vector<float>(out.size(), std::numeric_limits<float>::quiet_NaN()), c.dtype);
  DeviceMatrix d_in_gpu(poison_activation, c.dtype), d_weight_gpu(poison_weight, DType::f32),
      d_bias_gpu(poison_bias, DType::f32);
  Stream stream(testing::gpu());
  kernels::Workspace workspace(stream, testing::all_workspace_needs());
  cuda::linear_forward(in_gpu.view(), weight_gpu.view(), c.with_bias ? bias_gpu.view() : Tensor{}, out_gpu.view(), s,
                       workspace, stream);
  cuda::linear_backward(d_out_gpu.view(), in_gpu.view(), weight_gpu.view(), c.with_d_in ? d_in_gpu.view() : Tensor{},
                        d_weight_gpu.view(), c.with_bias ? d_bias_gpu.view() : Tensor{}, s, workspace, stream,
                        WeightGrad::overwrite);
  stream.synchronize();

  const double relative = c.dtype == DType::bf16 ? kBf16OutputRelative : 1e-6;
  expect_close(out_gpu.download(), out, out_mag, relative, kAccumulation, "linear_forward out, " + describe(c));
  if (c.with_d_in) {
    expect_close(d_in_gpu.download(), d_in, d_in_mag, relative, kAccumulation, "linear_backward d_in, " + describe(c));
  } else {
    const auto untouched = d_in_gpu.download();
    EXPECT_TRUE(std::isnan(untouched.front()) && std::isnan(untouched.back())) << "an empty d_in was written";
  }
  expect_close(d_weight_gpu.download(), d_weight, d_weight_mag, 1e-6, kAccumulation,
               "linear_backward d_weight, " + describe(c));
  if (c.with_bias) {
    expect_close(d_bias_gpu.download(), d_bias, d_bias_mag, 1e-6, kAccumulation,
                 "linear_backward d_bias, " + describe(c));
  } else {
    const auto untouched = d_bias_gpu.download();
    EXPECT_TRUE(std::isnan(untouched.front()) && std::isnan(untouched.back())) << "an empty d_bias was written";
  }
}

// WeightGrad::accumulate adds the weight gradient to d_weight's old contents in the GEMM
// (beta = 1), with or without the fused bias gradient: against old + the CPU's product.
TEST(CudaLinear, AccumulatedWeightGradientAddsToTheOldValue) {
  ADAMANT_REQUIRE_GPU();
  for (const bool with_bias : {true, false}) {
    const LinearShape s{256, 768, 3072};  // 126M MLP up projection
    std::mt19937_64 rng(with_bias ? 41 : 42);
    const auto in = random_values(s.rows * s.in_features, rng, 1.0f, true);
    const auto weight = random_values(s.out_features * s.in_features, rng, 0.02f, true);
    const auto d_out = random_values(s.rows * s.out_features, rng, 1e-3f, true);
    const auto old = random_values(s.out_features * s.in_features, rng, 0.5f, false);
    auto host = [](std::vector<float>& v) { return Tensor::flat(v.data(), DType::f32, Device::cpu(), v.size()); };
    std::vector<float> in_c = in, weight_c = weight, d_out_c = d_out, expected = old, d_bias(s.out_features);
    std::vector<float> product(s.out_features * s.in_features);  // the CPU kernel's scratch for adding
    cpu::linear_backward(host(d_out_c), host(in_c), host(weight_c), Tensor{}, host(expected),
                         with_bias ? host(d_bias) : Tensor{}, s, WeightGrad::accumulate, host(product));
    auto abs_in = absolute(in), abs_d_out = absolute(d_out), abs_weight = absolute(weight);
    std::vector<float> magnitude = absolute(old), abs_bias(s.out_features);
    cpu::linear_backward(host(abs_d_out), host(abs_in), host(abs_weight), Tensor{}, host(magnitude),
                         with_bias ? host(abs_bias) : Tensor{}, s, WeightGrad::accumulate, host(product));

    DeviceMatrix in_gpu(in, DType::bf16), weight_gpu(weight, DType::bf16), d_out_gpu(d_out, DType::bf16);
    DeviceMatrix d_weight_gpu(old, DType::f32);
    DeviceMatrix d_bias_gpu(std::vector<float>(s.out_features, std::numeric_limits<float>::quiet_NaN()), DType::f32);
    Stream stream(testing::gpu());
    kernels::Workspace workspace(stream, testing::all_workspace_needs());
    cuda::linear_backward(d_out_gpu.view(), in_gpu.view(), weight_gpu.view(), Tensor{}, d_weight_gpu.view(),
                          with_bias ? d_bias_gpu.view() : Tensor{}, s, workspace, stream, WeightGrad::accumulate);
    stream.synchronize();
    expect_close(d_weight_gpu.download(), expected, magnitude, 1e-6, kAccumulation,
                 with_bias ? "accumulated d_weight with the bias gradient" : "accumulated d_weight");
    if (with_bias) {
      expect_close(d_bias_gpu.download(), d_bias, abs_bias, 1e-6, kAccumulation, "bias gradient beside accumulation");
    }
  }
}

// A bf16 gradient buffer (GptConfig::grad_buffer): the weight-gradient GEMM writes the fp32
// product rounded to bf16 (beta 0), or adds it to the bf16 old value (beta 1), through the
// dispatcher that checks the operands; against the CPU's fp32 results within the fp32 bound plus
// bf16's unit roundoff (2^-8) of the result and of the terms' magnitude: cuBLASLt may round the
// product to the output type before it adds the old value.
TEST(CudaLinear, WeightGradientIntoABf16BufferMatchesTheCpuRounded) {
  ADAMANT_REQUIRE_GPU();
  for (const WeightGrad mode : {WeightGrad::overwrite, WeightGrad::accumulate}) {
    const bool adds = mode == WeightGrad::accumulate;
    SCOPED_TRACE(adds ? "accumulate" : "overwrite");
    const LinearShape s{512, 768, 1280};  // within the test workspace's weight_grad_elements
    std::mt19937_64 rng(adds ? 43 : 44);
    const auto in = random_values(s.rows * s.in_features, rng, 1.0f, true);
    const auto weight = random_values(s.out_features * s.in_features, rng, 0.02f, true);
    const auto d_out = random_values(s.rows * s.out_features, rng, 1e-3f, true);
    const auto old = random_values(s.out_features * s.in_features, rng, 0.05f, true);  // bf16 values
    auto host = [](std::vector<float>& v) { return Tensor::flat(v.data(), DType::f32, Device::cpu(), v.size()); };
    std::vector<float> in_c = in, weight_c = weight, d_out_c = d_out, expected = old;
    std::vector<float> product(s.out_features * s.in_features);
    cpu::linear_backward(host(d_out_c), host(in_c), host(weight_c), Tensor{}, host(expected), Tensor{}, s, mode,
                         host(product));
    auto abs_in = absolute(in), abs_d_out = absolute(d_out), abs_weight = absolute(weight);
    std::vector<float> magnitude = absolute(old);
    cpu::linear_backward(host(abs_d_out), host(abs_in), host(abs_weight), Tensor{}, host(magnitude), Tensor{}, s, mode,
                         host(product));

    DeviceMatrix in_gpu(in, DType::bf16), weight_gpu(weight, DType::bf16), d_out_gpu(d_out, DType::bf16);
    DeviceMatrix d_weight_gpu(old, DType::bf16);
    Stream stream(testing::gpu());
    kernels::Workspace workspace(stream, testing::all_workspace_needs());
    kernels::linear_backward(d_out_gpu.view(), in_gpu.view(), weight_gpu.view(), Tensor{}, d_weight_gpu.view(),
                             Tensor{}, s, workspace, stream, mode);
    stream.synchronize();
    expect_close(d_weight_gpu.download(), expected, magnitude, kBf16OutputRelative, kAccumulation + 0x1p-8,
                 adds ? "bf16 d_weight accumulated" : "bf16 d_weight written");
  }
}

// A bias gradient stays fp32 (it is summed in the micro-batch scratch): a bf16 one is refused.
TEST(CudaLinear, RefusesABf16BiasGradient) {
  ADAMANT_REQUIRE_GPU();
  const LinearShape s{64, 32, 48};
  std::mt19937_64 rng(45);
  DeviceMatrix in_gpu(random_values(s.rows * s.in_features, rng, 1.0f, true), DType::bf16);
  DeviceMatrix weight_gpu(random_values(s.out_features * s.in_features, rng, 0.02f, true), DType::bf16);
  DeviceMatrix d_out_gpu(random_values(s.rows * s.out_features, rng, 1e-3f, true), DType::bf16);
  DeviceMatrix d_weight_gpu(std::vector<float>(s.out_features * s.in_features, 0.0f), DType::bf16);
  DeviceMatrix d_bias_gpu(std::vector<float>(s.out_features, 0.0f), DType::bf16);
  Stream stream(testing::gpu());
  kernels::Workspace workspace(stream, testing::all_workspace_needs());
  EXPECT_THROW(kernels::linear_backward(d_out_gpu.view(), in_gpu.view(), weight_gpu.view(), Tensor{},
                                        d_weight_gpu.view(), d_bias_gpu.view(), s, workspace, stream),
               Error);
}

// The data gradient and the parameter gradients as two calls, as selective recomputation
// runs the MLP's down projection: each bitwise what the single call gives (the same GEMMs),
// and the weight-gradient call leaves a skipped d_in untouched.
TEST(CudaLinear, DataAndParameterGradientsAsSeparateCallsAreTheSingleCallsBits) {
  ADAMANT_REQUIRE_GPU();
  const LinearShape s{256, 3072, 768};  // 126M MLP down projection
  std::mt19937_64 rng(43);
  const auto in = random_values(s.rows * s.in_features, rng, 1.0f, true);
  const auto weight = random_values(s.out_features * s.in_features, rng, 0.02f, true);
  const auto d_out = random_values(s.rows * s.out_features, rng, 1e-3f, true);
  const auto old = random_values(s.out_features * s.in_features, rng, 0.5f, false);
  DeviceMatrix in_gpu(in, DType::bf16), weight_gpu(weight, DType::bf16), d_out_gpu(d_out, DType::bf16);
  DeviceMatrix d_in_joint(std::vector<float>(s.rows * s.in_features), DType::bf16);
  DeviceMatrix d_weight_joint(old, DType::f32), d_bias_joint(std::vector<float>(s.out_features), DType::f32);
  DeviceMatrix d_in_split(std::vector<float>(s.rows * s.in_features, 3.0f), DType::bf16);
  DeviceMatrix d_weight_split(old, DType::f32), d_bias_split(std::vector<float>(s.out_features), DType::f32);
  Stream stream(testing::gpu());
  kernels::Workspace workspace(stream, testing::all_workspace_needs());
  cuda::linear_backward(d_out_gpu.view(), in_gpu.view(), weight_gpu.view(), d_in_joint.view(), d_weight_joint.view(),
                        d_bias_joint.view(), s, workspace, stream, WeightGrad::accumulate);
  cuda::linear_backward(d_out_gpu.view(), in_gpu.view(), weight_gpu.view(), Tensor{}, d_weight_split.view(),
                        d_bias_split.view(), s, workspace, stream, WeightGrad::accumulate);
  stream.synchronize();
  EXPECT_EQ(d_in_split.download(), std::vector<float>(s.rows * s.in_features, 3.0f)) << "d_in written";
  cuda::linear_backward(d_out_gpu.view(), Tensor{}, weight_gpu.view(), d_in_split.view(), Tensor{}, Tensor{}, s,
                        workspace, stream, WeightGrad::accumulate);
  stream.synchronize();
  EXPECT_EQ(d_in_split.download(), d_in_joint.download()) << "d_in";
  EXPECT_EQ(d_weight_split.download(), d_weight_joint.download()) << "d_weight";
  EXPECT_EQ(d_bias_split.download(), d_bias_joint.download()) << "d_bias";
}

TEST(CudaLinear, ForwardAndBackwardMatchTheCpu) {
  ADAMANT_REQUIRE_GPU();
  const std::vector<LinearCase> cases = {
      {{13, 37, 29}, DType::bf16, true},             // odd sizes
      {{13, 37, 29}, DType::bf16, false},            // d_in skipped
      {{256, 768, 2304}, DType::bf16, true},         // 126M qkv projection
      {{256, 3072, 768}, DType::bf16, true},         // 126M MLP down projection
      {{64, 2048, 2048}, DType::bf16, true},         // 1.3B attention output projection
      {{19, 40, 24}, DType::f32, true},              // fp32 throughout
      {{300, 64, 96}, DType::bf16, true},            // more rows than one slice of the column sums
      {{256, 768, 2304}, DType::bf16, true, false},  // no bias (row-parallel ranks but one)
      {{13, 37, 29}, DType::bf16, false, false},
      {{19, 40, 24}, DType::f32, true, false},
  };
  std::uint64_t seed = 11;
  for (const LinearCase& c : cases) check_linear(c, seed++);
}

// The column sums of linear_backward's bias gradient on their own: against double sums,
// tolerance 1e-5 of the sum of |x|. bf16 rows of a multiple of 8 columns take the 16-byte
// kernel, the rest the scalar one.
void check_column_sums(std::int64_t rows, std::int64_t cols, DType dtype, std::int64_t scratch_floats,
                       std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const auto x = random_values(rows * cols, rng, 1.0f, dtype == DType::bf16);
  std::vector<float> expected(cols), magnitude(cols);
  for (std::int64_t j = 0; j < cols; ++j) {
    double sum = 0, abs_sum = 0;
    for (std::int64_t i = 0; i < rows; ++i) {
      sum += x[i * cols + j];
      abs_sum += std::abs(x[i * cols + j]);
    }
    expected[j] = static_cast<float>(sum);
    magnitude[j] = static_cast<float>(abs_sum);
  }
  DeviceMatrix x_gpu(x.empty() ? std::vector<float>{0.0f} : x, dtype);
  DeviceMatrix sums_gpu(std::vector<float>(cols, std::numeric_limits<float>::quiet_NaN()), DType::f32);
  MirroredArray<float> scratch(static_cast<std::size_t>(scratch_floats > 0 ? scratch_floats : 1), DType::f32);
  ASSERT_EQ(cuda::launchers::column_sums(x_gpu.view().data, dtype, rows, cols,
                                         scratch_floats > 0 ? static_cast<float*>(scratch.device_view().data) : nullptr,
                                         scratch_floats, static_cast<float*>(sums_gpu.view().data), nullptr),
            cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  expect_close(sums_gpu.download(), expected, magnitude, 0.0, 1e-5,
               "column_sums " + std::to_string(rows) + "x" + std::to_string(cols) + " " +
                   std::string(dtype_name(dtype)) + " scratch " + std::to_string(scratch_floats));
}

TEST(CudaLinear, ColumnSumsMatchDoubleSums) {
  ADAMANT_REQUIRE_GPU();
  check_column_sums(16384, 768, DType::bf16, 1 << 20, 1);  // 126M: 8 x 2048 tokens, many slices
  check_column_sums(8192, 2304, DType::bf16, 1 << 22, 7);  // a qkv projection's width
  check_column_sums(1000, 264, DType::bf16, 1 << 20, 8);   // 16-byte kernel, a partial column block
  check_column_sums(20, 16, DType::bf16, 1 << 20, 9);      // fewer rows than a slice's minimum
  check_column_sums(1000, 264, DType::bf16, 600, 10);      // 16-byte kernel, scratch for 2 slices
  check_column_sums(1000, 33, DType::f32, 1 << 20, 2);     // odd columns
  check_column_sums(1000, 33, DType::bf16, 100, 3);        // scratch for 3 slices only
  check_column_sums(777, 5, DType::f32, 0, 4);             // no scratch: one pass
  check_column_sums(0, 7, DType::bf16, 1 << 10, 5);        // no rows: zeros
  check_column_sums(1, 1, DType::f32, 1 << 10, 6);
}

}  // namespace
}  // namespace adamant::kernels
