// CUDA layernorm, GELU, residual add and dropout against the CPU
// reference kernels (kernels/cpu/). Inputs are rounded to bf16 first; the CPU
// kernel runs in fp32 on the rounded values and the CUDA kernel on their bf16
// patterns, so the only differences are fp32 evaluation order and the final bf16
// rounding of the GPU outputs.
//
// Tolerances. A bf16 output is the fp32 result rounded to 8 significant bits: it
// differs from the exact value by at most 2^-8 relative (half a unit in the last
// place, relative to the leading bit), so bf16 outputs are compared with
// 5e-3 * |cpu| (> 2^-8 = 3.9e-3) plus a small absolute term for the fp32
// differences of terms that cancel. fp32 column sums (d_weight, d_bias) are
// compared with 1e-5 * (sum of the absolute values of their terms), well above
// the rounding of a differently ordered fp32 sum. Results whose GPU and CPU
// formulas are the same fp32 operations in the same order (residual add, dropout)
// must agree bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "adamant/core/half.h"
#include "adamant/core/rng.h"
#include "adamant/kernels/cpu/model_kernels_cpu.h"
#include "adamant/kernels/cuda/pointwise_model_philox.cuh"
#include "adamant/kernels/dropout.h"
#include "kernels/cuda_test_util.h"
#include "kernels/model_kernels_test_util.h"
#include "workspace_test_util.h"

namespace adamant::kernels {
namespace {

using testing::MirroredArray;
using testing::view;

using testing::bf16_on_gpu;
using testing::download_bf16;
using testing::expect_near_all;
using testing::f32_on_gpu;
using testing::rounded_normal;
using testing::to_bf16_bits;

// bf16 output against the fp32 CPU value: rounding (<= 2^-8 relative) plus `absolute`.
auto bf16_tolerance(const std::vector<float>& cpu, double absolute) {
  return [&cpu, absolute](std::size_t i) { return 5e-3 * std::abs(static_cast<double>(cpu[i])) + absolute; };
}

// ---- Philox: the device code is host-callable, so it is checked here word for word ----

TEST(CudaPointwisePhilox, DeviceGeneratorMatchesCoreRngBitForBit) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 20000; ++trial) {
    const std::uint64_t seed = rng();
    const std::uint64_t index = trial < 100 ? static_cast<std::uint64_t>(trial) : rng();
    const std::uint64_t stream = rng() >> 1;
    const PhiloxCounter expected = philox_draw(seed, index, stream);
    const cuda::PhiloxWords actual = cuda::philox_draw(seed, index, stream);
    const PhiloxCounter expected7 = philox_draw<7>(seed, index, stream);
    const cuda::PhiloxWords actual7 = cuda::philox_draw<7>(seed, index, stream);
    for (int w = 0; w < 4; ++w) {
      ASSERT_EQ(actual.word[w], expected[w])
          << "seed " << seed << " index " << index << " stream " << stream << " word " << w;
      ASSERT_EQ(actual7.word[w], expected7[w])
          << "7 rounds: seed " << seed << " index " << index << " stream " << stream << " word " << w;
    }
  }
  DropoutArgs args;
  args.seed = 0x0123456789abcdefull;
  args.first_sample_index = 987654321;
  args.site = 0xabcdef;
  for (std::uint64_t sample = 0; sample < 8; ++sample) {
    for (std::uint64_t group = 0; group < 512; ++group) {
      const PhiloxCounter expected = dropout_bits(args, sample, group);
      const auto actual =
          cuda::pointwise_detail::dropout_bits(args.seed, args.first_sample_index + sample, args.site, group);
      for (int w = 0; w < 4; ++w) {
        ASSERT_EQ(actual.word[w], expected[w]) << "sample " << sample << " group " << group;
        for (const float p : {0.0f, 0.1f, 0.5f, 0.999f}) {
          ASSERT_EQ(cuda::pointwise_detail::dropout_keeps(actual.word[w], p), dropout_keeps(expected[w], p));
        }
      }
    }
  }
  // uniform_float's edges: 0 and the largest 24-bit value.
  EXPECT_TRUE(cuda::pointwise_detail::dropout_keeps(0xffffffffu, 0.999999f));
  EXPECT_FALSE(cuda::pointwise_detail::dropout_keeps(0x000000ffu, 1e-9f));
}

// ---- layernorm ----

struct RowsCase {
  std::int64_t rows;
  std::int64_t cols;
  std::size_t offset;  // elements into the allocations: 1 forbids 16-byte accesses
};

std::string name_of(const RowsCase& c) {
  return std::to_string(c.rows) + "x" + std::to_string(c.cols) + (c.offset ? " unaligned" : "");
}

// Rows of 1,000: 125 vectors, so the backward's last threads hold none. 5,120 and 4,104:
// two vectors a thread, the last thread's second past the row for 4,104. 8,192: the
// longest rows the backward holds in registers; 8,200: its tile kernel. The last two:
// chunks of the backward's column sums longer than the least (8 rows), and more of them
// than its target of 1024.
const std::vector<RowsCase> kLayernormCases = {
    {512, 768, 0}, {256, 2048, 0}, {37, 100, 0},  {19, 1000, 1},  {3, 1, 0},      {64, 1000, 0},  {40, 5120, 0},
    {24, 4104, 0}, {20, 8192, 0},  {17, 8200, 0}, {8192, 768, 0}, {600, 2048, 1}, {20000, 64, 0}, {70001, 16, 0}};

TEST(CudaLayernorm, ForwardMatchesCpu) {
  ADAMANT_REQUIRE_GPU();
  const Stream stream(testing::gpu());
  for (const RowsCase& c : kLayernormCases) {
    SCOPED_TRACE(name_of(c));
    const auto n = static_cast<std::size_t>(c.rows * c.cols);
    const auto cols = static_cast<std::size_t>(c.cols);
    const auto rows = static_cast<std::size_t>(c.rows);
    std::vector<float> x = rounded_normal(n, 11, 0.3, 1.5);
    std::vector<float> weight = rounded_normal(cols, 12, 1.0, 0.1);
    std::vector<float> bias = rounded_normal(cols, 13, 0.0, 0.1);
    std::vector<float> out(n), mean(rows), rstd(rows);
    const RowsShape shape{c.rows, c.cols};
    cpu::layernorm_forward(view(x), view(weight), view(bias), 1e-5, view(out), view(mean), view(rstd), shape);

    auto x_gpu = bf16_on_gpu(x, c.offset);
    auto weight_gpu = bf16_on_gpu(weight, c.offset);
    auto bias_gpu = bf16_on_gpu(bias, c.offset);
    MirroredArray<std::uint16_t> out_gpu(n, DType::bf16, c.offset);
    MirroredArray<float> mean_gpu(rows, DType::f32), rstd_gpu(rows, DType::f32);
    cuda::layernorm_forward(x_gpu.device_view(), weight_gpu.device_view(), bias_gpu.device_view(), 1e-5,
                            out_gpu.device_view(), mean_gpu.device_view(), rstd_gpu.device_view(), shape, stream);
    stream.synchronize();
    // mean and rstd are fp32 reductions in another order: a few fp32 ulps.
    const std::vector<float> gpu_mean = mean_gpu.download();
    const std::vector<float> gpu_rstd = rstd_gpu.download();
    expect_near_all(
        gpu_mean, mean, [&](std::size_t i) { return 1e-5 + 1e-5 * std::abs(mean[i]); }, "mean");
    expect_near_all(
        gpu_rstd, rstd, [&](std::size_t i) { return 1e-5 * std::abs(rstd[i]); }, "rstd");
    // out = xhat * w + b with |xhat| up to ~5: fp32 differences stay below 1e-4.
    expect_near_all(download_bf16(out_gpu), out, bf16_tolerance(out, 1e-4), "out");
  }
}

TEST(CudaLayernorm, BackwardMatchesCpuAndIsDeterministic) {
  ADAMANT_REQUIRE_GPU();
  const Stream stream(testing::gpu());
  kernels::Workspace workspace(stream, testing::all_workspace_needs());
  for (const RowsCase& c : kLayernormCases) {
    SCOPED_TRACE(name_of(c));
    const auto n = static_cast<std::size_t>(c.rows * c.cols);
    const auto cols = static_cast<std::size_t>(c.cols);
    const auto rows = static_cast<std::size_t>(c.rows);
    std::vector<float> x = rounded_normal(n, 21, -0.2, 1.3);
    std::vector<float> weight = rounded_normal(cols, 22, 1.0, 0.2);
    std::vector<float> bias = rounded_normal(cols, 23, 0.0, 0.1);
    std::vector<float> d_out = rounded_normal(n, 24, 0.0, 1.0);
    std::vector<float> d_x_initial = rounded_normal(n, 25, 0.0, 0.5);
    std::vector<float> out(n), mean(rows), rstd(rows);
    const RowsShape shape{c.rows, c.cols};
    cpu::layernorm_forward(view(x), view(weight), view(bias), 1e-5, view(out), view(mean), view(rstd), shape);
    std::vector<float> d_x = d_x_initial, d_weight(cols), d_bias(cols);
    cpu::layernorm_backward(view(d_out), view(x), view(weight), view(mean), view(rstd), view(d_x), view(d_weight),
                            view(d_bias), shape);
    // Sums of |terms| of the column reductions, for their tolerance.
    std::vector<double> weight_terms(cols, 0.0), bias_terms(cols, 0.0);
    for (std::size_t r = 0; r < rows; ++r) {
      for (std::size_t k = 0; k < cols; ++k) {
        const double dy = d_out[r * cols + k];
        weight_terms[k] += std::abs(dy * (x[r * cols + k] - mean[r]) * rstd[r]);
        bias_terms[k] += std::abs(dy);
      }
    }

    auto d_out_gpu = bf16_on_gpu(d_out, c.offset);
    auto x_gpu = bf16_on_gpu(x, c.offset);
    auto weight_gpu = bf16_on_gpu(weight, c.offset);
    auto mean_gpu = f32_on_gpu(mean);
    auto rstd_gpu = f32_on_gpu(rstd);
    auto d_x_gpu = bf16_on_gpu(d_x_initial, c.offset);
    // NaN-filled parameter gradients: backward must overwrite them.
    auto d_weight_gpu = f32_on_gpu(std::vector<float>(cols, std::numeric_limits<float>::quiet_NaN()));
    auto d_bias_gpu = f32_on_gpu(std::vector<float>(cols, std::numeric_limits<float>::quiet_NaN()));
    auto run = [&] {
      cuda::layernorm_backward(d_out_gpu.device_view(), x_gpu.device_view(), weight_gpu.device_view(),
                               mean_gpu.device_view(), rstd_gpu.device_view(), d_x_gpu.device_view(),
                               d_weight_gpu.device_view(), d_bias_gpu.device_view(), shape, workspace, stream);
      stream.synchronize();
    };
    run();
    const std::vector<std::uint16_t> d_x_first = d_x_gpu.download();
    const std::vector<float> d_weight_first = d_weight_gpu.download();
    const std::vector<float> d_bias_first = d_bias_gpu.download();
    // d_x = initial + rstd * (...): fp32 differences of a few 1e-6 relative to terms of size ~1-5.
    expect_near_all(download_bf16(d_x_gpu), d_x, bf16_tolerance(d_x, 1e-4), "d_x (accumulated)");
    expect_near_all(
        d_weight_first, d_weight, [&](std::size_t k) { return 1e-5 * weight_terms[k] + 1e-6; }, "d_weight");
    expect_near_all(
        d_bias_first, d_bias, [&](std::size_t k) { return 1e-5 * bias_terms[k] + 1e-6; }, "d_bias");

    // A second run from the same inputs gives the same bits.
    d_x_gpu.upload();  // host still holds the initial d_x patterns
    run();
    testing::expect_bitwise_equal(d_x_gpu.download(), d_x_first, "d_x run to run");
    testing::expect_bitwise_equal(d_weight_gpu.download(), d_weight_first, "d_weight run to run");
    testing::expect_bitwise_equal(d_bias_gpu.download(), d_bias_first, "d_bias run to run");
  }
}

// ---- GELU and residual add ----

TEST(CudaGelu, ForwardAndBackwardMatchCpu) {
  ADAMANT_REQUIRE_GPU();
  const Stream stream(testing::gpu());
  for (const GeluForm form : {GeluForm::exact, GeluForm::tanh}) {
    for (const std::size_t offset : {std::size_t{0}, std::size_t{1}}) {
      for (const std::size_t n : {std::size_t{(1u << 20) + 7}, std::size_t{13}}) {
        SCOPED_TRACE("n " + std::to_string(n) + " offset " + std::to_string(offset) + " form " +
                     (form == GeluForm::exact ? "exact" : "tanh"));
        std::vector<float> x = rounded_normal(n, 31, 0.0, 2.5);
        std::vector<float> d_out = rounded_normal(n, 32, 0.0, 1.0);
        std::vector<float> out(n), d_x(n);
        const auto count = static_cast<std::int64_t>(n);
        cpu::gelu_forward(view(x), view(out), count, form);
        cpu::gelu_backward(view(d_out), view(x), view(d_x), Tensor{}, count, form);

        auto x_gpu = bf16_on_gpu(x, offset);
        auto d_out_gpu = bf16_on_gpu(d_out, offset);
        MirroredArray<std::uint16_t> out_gpu(n, DType::bf16, offset);
        gelu_forward(x_gpu.device_view(), out_gpu.device_view(), count, form, stream);
        // d_x aliases d_out, as the header allows.
        gelu_backward(d_out_gpu.device_view(), x_gpu.device_view(), d_out_gpu.device_view(), count, form, stream);
        stream.synchronize();
        // erff/expf/tanhf are within 2 fp32 ulps: absolute error ~1e-7 * |x| where Phi(x) cancels to ~0.
        expect_near_all(
            download_bf16(out_gpu), out,
            [&](std::size_t i) { return 5e-3 * std::abs(out[i]) + 1e-6 * (1.0 + std::abs(x[i])); }, "gelu");
        expect_near_all(
            download_bf16(d_out_gpu), d_x,
            [&](std::size_t i) { return 5e-3 * std::abs(d_x[i]) + 1e-6 * std::abs(d_out[i]) * (1.0 + std::abs(x[i])); },
            "gelu backward");

        // The backward that also rematerialises the forward output: that output bitwise the
        // forward's, the gradient bitwise the plain backward's.
        auto d_again = bf16_on_gpu(d_out, offset);
        MirroredArray<std::uint16_t> rematerialized(n, DType::bf16, offset);
        gelu_backward(d_again.device_view(), x_gpu.device_view(), d_again.device_view(), count, form, stream,
                      rematerialized.device_view());
        stream.synchronize();
        EXPECT_EQ(rematerialized.download(), out_gpu.download()) << "rematerialised gelu output";
        EXPECT_EQ(d_again.download(), d_out_gpu.download()) << "gradient next to the rematerialisation";
      }
    }
  }
}

TEST(CudaResidualAdd, MatchesCpuBitForBitIncludingInPlace) {
  ADAMANT_REQUIRE_GPU();
  const Stream stream(testing::gpu());
  for (const std::size_t offset : {std::size_t{0}, std::size_t{1}}) {
    const std::size_t n = 3 * 2048 * 768 + 5;
    SCOPED_TRACE("offset " + std::to_string(offset));
    std::vector<float> a = rounded_normal(n, 41, 0.0, 3.0);
    std::vector<float> b = rounded_normal(n, 42, 0.0, 0.5);
    std::vector<float> sum(n);
    cpu::residual_add(view(a), view(b), view(sum), static_cast<std::int64_t>(n));
    const std::vector<std::uint16_t> expected = to_bf16_bits(sum);

    auto a_gpu = bf16_on_gpu(a, offset);
    auto b_gpu = bf16_on_gpu(b, offset);
    MirroredArray<std::uint16_t> out_gpu(n, DType::bf16, offset);
    residual_add(a_gpu.device_view(), b_gpu.device_view(), out_gpu.device_view(), static_cast<std::int64_t>(n), stream);
    // In place: out aliases b (the residual stream).
    residual_add(a_gpu.device_view(), b_gpu.device_view(), b_gpu.device_view(), static_cast<std::int64_t>(n), stream);
    stream.synchronize();
    testing::expect_bitwise_equal(out_gpu.download(), expected, "a + b");
    testing::expect_bitwise_equal(b_gpu.download(), expected, "b += a in place");
  }
}

// ---- dropout ----

struct DropoutCase {
  std::int64_t batch;
  std::int64_t sample_numel;
  std::size_t offset;
  bool in_place;
};

TEST(CudaDropout, MaskAndValuesMatchCpuBitForBit) {
  ADAMANT_REQUIRE_GPU();
  const Stream stream(testing::gpu());
  DropoutArgs args;
  args.probability = 0.1f;
  args.seed = 0x5eed5eed12345678ull;
  args.first_sample_index = 1000003;
  args.site = 77;
  const std::vector<DropoutCase> cases = {
      {4, 128 * 768, 0, false}, {3, 1001, 0, false}, {2, 4100, 1, false}, {5, 2048 + 3, 0, true}, {2, 768, 0, true}};
  for (const DropoutCase& c : cases) {
    SCOPED_TRACE("batch " + std::to_string(c.batch) + " sample " + std::to_string(c.sample_numel) + " offset " +
                 std::to_string(c.offset) + (c.in_place ? " in place" : ""));
    const auto n = static_cast<std::size_t>(c.batch * c.sample_numel);
    std::vector<float> in = rounded_normal(n, 51, 0.0, 1.0);
    for (float& v : in) {
      if (v == 0.0f) v = 1.0f;  // zero then means dropped
    }
    std::vector<float> out(n);
    cpu::dropout(view(in), view(out), c.batch * c.sample_numel, c.sample_numel, args);

    auto in_gpu = bf16_on_gpu(in, c.offset);
    MirroredArray<std::uint16_t> out_gpu(n, DType::bf16, c.offset);
    MirroredArray<std::uint16_t>& result = c.in_place ? in_gpu : out_gpu;
    dropout(in_gpu.device_view(), result.device_view(), c.batch * c.sample_numel, c.sample_numel, args, stream);
    stream.synchronize();
    const std::vector<std::uint16_t> actual = result.download();

    std::size_t mask_mismatches = 0;
    std::size_t first = 0;
    std::size_t dropped = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const bool gpu_dropped = bf16_to_f32(actual[i]) == 0.0f;
      const bool cpu_dropped = out[i] == 0.0f;
      dropped += cpu_dropped ? 1 : 0;
      if (gpu_dropped != cpu_dropped && mask_mismatches++ == 0) first = i;
    }
    EXPECT_EQ(mask_mismatches, 0u) << "dropout masks differ at " << mask_mismatches << " elements; first at " << first
                                   << " (sample " << first / static_cast<std::size_t>(c.sample_numel) << ", element "
                                   << first % static_cast<std::size_t>(c.sample_numel) << "): gpu "
                                   << bf16_to_f32(actual[first]) << ", cpu " << out[first];
    testing::expect_bitwise_equal(actual, to_bf16_bits(out), "dropout values");

    // The first sample index split between the launch and GPU memory (a recorded pass's).
    MirroredArray<std::uint64_t> offset(1, DType::i64);
    offset.host[0] = 1000;
    offset.upload();
    DropoutArgs split = args;
    split.first_sample_index = args.first_sample_index - 1000;
    split.sample_offset = static_cast<const std::uint64_t*>(offset.device_view().data);
    auto again_in = bf16_on_gpu(in, c.offset);
    MirroredArray<std::uint16_t> again_out(n, DType::bf16, c.offset);
    MirroredArray<std::uint16_t>& again = c.in_place ? again_in : again_out;
    dropout(again_in.device_view(), again.device_view(), c.batch * c.sample_numel, c.sample_numel, split, stream);
    stream.synchronize();
    testing::expect_bitwise_equal(again.download(), actual, "dropout with the sample offset in memory");
    if (n > 100000) {  // the reference itself drops about p of the elements
      EXPECT_NEAR(static_cast<double>(dropped) / static_cast<double>(n), 0.1, 0.01);
    }
  }
}

// A sequence-parallel shard: rows [first_element, first_element + numel) of the batch,
// possibly starting and ending inside samples, against that slice of the CPU kernel's
// whole-batch output.
TEST(CudaDropout, ShardAtAnElementOffsetMatchesTheSliceOfTheWholeBatch) {
  ADAMANT_REQUIRE_GPU();
  const Stream stream(testing::gpu());
  DropoutArgs args;
  args.probability = 0.3f;
  args.seed = 0x0ddba11cafef00dull;
  args.first_sample_index = 4242;
  args.site = 5;
  struct Shard {
    std::int64_t sample_numel;
    std::int64_t first_element;
    std::int64_t numel;
    std::size_t offset;  // elements into the GPU allocation: 1 forces the scalar path
  };
  const std::int64_t samples = 4;
  const std::vector<Shard> shards = {{128 * 768, 96 * 768, 128 * 768, 0},  // two half samples (SP, T = 2 of L = 128)
                                     {128 * 768, 4, 3 * 128 * 768 - 4, 0},
                                     {128 * 768, 128 * 768 - 4, 13, 0},
                                     {1001, 996, 1000, 0},
                                     {1001, 2000, 2004, 0},
                                     {1024, 1020, 2051, 1},
                                     {1024, 1020, 2051, 0},
                                     {6, 4, 13, 0}};
  for (const Shard& shard : shards) {
    SCOPED_TRACE("sample " + std::to_string(shard.sample_numel) + " shard [" + std::to_string(shard.first_element) +
                 ", +" + std::to_string(shard.numel) + ") offset " + std::to_string(shard.offset));
    const std::int64_t total = samples * shard.sample_numel;
    ASSERT_LE(shard.first_element + shard.numel, total);
    std::vector<float> in = rounded_normal(static_cast<std::size_t>(total), 53, 0.0, 1.0);
    for (float& v : in) {
      if (v == 0.0f) v = 1.0f;  // zero then means dropped
    }
    std::vector<float> whole(in.size());
    cpu::dropout(view(in), view(whole), total, shard.sample_numel, args);
    const std::vector<float> expected(whole.begin() + shard.first_element,
                                      whole.begin() + shard.first_element + shard.numel);

    const std::vector<float> part(in.begin() + shard.first_element, in.begin() + shard.first_element + shard.numel);
    auto part_gpu = bf16_on_gpu(part, shard.offset);
    DropoutArgs shard_args = args;
    shard_args.first_element = static_cast<std::uint64_t>(shard.first_element);
    dropout(part_gpu.device_view(), part_gpu.device_view(), shard.numel, shard.sample_numel, shard_args, stream);
    stream.synchronize();
    testing::expect_bitwise_equal(part_gpu.download(), to_bf16_bits(expected), "the shard's dropout");
  }
  auto any = bf16_on_gpu(std::vector<float>(16, 1.0f));
  DropoutArgs misaligned = args;
  misaligned.first_element = 2;
  EXPECT_THROW(dropout(any.device_view(), any.device_view(), 16, 8, misaligned, stream), Error);
}

TEST(CudaDropout, ZeroProbabilityCopies) {
  ADAMANT_REQUIRE_GPU();
  const Stream stream(testing::gpu());
  const std::vector<float> in = rounded_normal(1000, 52, 0.0, 1.0);
  auto in_gpu = bf16_on_gpu(in);
  MirroredArray<std::uint16_t> out_gpu(in.size(), DType::bf16);
  dropout(in_gpu.device_view(), out_gpu.device_view(), 1000, 100, DropoutArgs{}, stream);
  stream.synchronize();
  testing::expect_bitwise_equal(out_gpu.download(), to_bf16_bits(in), "p = 0 copy");
}

}  // namespace
}  // namespace adamant::kernels
