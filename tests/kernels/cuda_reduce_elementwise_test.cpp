// CUDA squared_norm, cast, scale, accumulate and fill_zero against the CPU
// reference kernels: the norm to a relative 1e-6 and bitwise run to run, the
// element-wise kernels bit for bit, on odd sizes and unaligned views.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "adamant/core/half.h"
#include "adamant/kernels/cpu/model_kernels_cpu.h"
#include "adamant/kernels/elementwise.h"
#include "adamant/kernels/reduce.h"
#include "kernels/cuda_test_util.h"
#include "workspace_test_util.h"

namespace adamant::kernels {
namespace {

using testing::MirroredArray;
using testing::SegmentLayout;

// An input for squared_norm: fp32 values and their bf16 patterns, on the GPU.
struct NormInput {
  NormInput(const SegmentLayout& layout, std::uint64_t seed)
      : segments(layout.table.size(), DType::i64), f32(layout.numel, DType::f32), bf16(layout.numel, DType::bf16) {
    std::mt19937_64 rng(seed);
    segments.host = layout.table;
    for (std::size_t i = 0; i < layout.numel; ++i) {
      f32.host[i] = testing::random_magnitude(rng, -4, 1);
      bf16.host[i] = f32_to_bf16(f32.host[i]);
    }
    segments.upload();
    f32.upload();
    bf16.upload();
  }
  MirroredArray<std::int64_t> segments;
  MirroredArray<float> f32;
  MirroredArray<std::uint16_t> bf16;
};

double gpu_squared_norm(const Tensor& x, const Tensor& segments, double initial, bool accumulate,
                        const Stream& stream) {
  MirroredArray<double> out(1, DType::f64);
  out.host[0] = initial;
  out.upload();
  kernels::Workspace workspace(x.device, stream, kernels::WorkspaceNeeds{.squared_norm = true});
  squared_norm(x, segments, out.device_view(), accumulate, workspace, stream);
  stream.synchronize();
  return out.download()[0];
}

double cpu_squared_norm(const Tensor& x, const Tensor& segments, double initial, bool accumulate) {
  double out = initial;
  cpu::squared_norm(x, segments, Tensor::flat(&out, DType::f64, Device::cpu(), 1), accumulate);
  return out;
}

TEST(CudaSquaredNorm, MatchesCpuOnThirteenMillionElements) {
  ADAMANT_REQUIRE_GPU();
  std::mt19937_64 rng(31);
  const SegmentLayout layout = testing::random_layout(rng, 900, 3, 64, 200000);
  ASSERT_GT(layout.numel, 10'000'000u);
  NormInput input(layout, 301);
  const Stream stream(testing::gpu());
  for (const bool bf16 : {false, true}) {
    const Tensor x_gpu = bf16 ? input.bf16.device_view() : input.f32.device_view();
    const Tensor x_cpu = bf16 ? input.bf16.host_view() : input.f32.host_view();
    for (const bool accumulate : {false, true}) {
      const double expected = cpu_squared_norm(x_cpu, input.segments.host_view(), 1234.5, accumulate);
      const double actual = gpu_squared_norm(x_gpu, input.segments.device_view(), 1234.5, accumulate, stream);
      EXPECT_NEAR(actual, expected, 1e-12 * expected) << (bf16 ? "bf16" : "fp32") << " accumulate=" << accumulate;
    }
  }
}

// Segments of `layout` for a view starting `shift` elements in (those before it dropped).
MirroredArray<std::int64_t> shifted_segments(const SegmentLayout& layout, std::int64_t shift) {
  std::vector<std::int64_t> shifted;
  for (std::size_t s = 0; s < layout.table.size(); s += 3) {
    if (layout.table[s] < shift) continue;
    shifted.push_back(layout.table[s] - shift);
    shifted.push_back(layout.table[s + 1] - shift);
    shifted.push_back(layout.table[s + 2]);
  }
  MirroredArray<std::int64_t> segments(shifted.size(), DType::i64);
  segments.host = shifted;
  segments.upload();
  return segments;
}

TEST(CudaSquaredNorm, ManyTinySegmentsUnalignedMatchCpu) {
  ADAMANT_REQUIRE_GPU();
  std::mt19937_64 rng(32);
  const SegmentLayout layout = testing::random_layout(rng, 5000, 1, 7, 50);
  NormInput input(layout, 302);
  const Stream stream(testing::gpu());
  // Views starting 1 element in (no 16-byte accesses possible), and for bf16 4 elements in: 8-byte
  // aligned, still no 16-byte group.
  for (const bool bf16 : {false, true}) {
    for (const std::int64_t shift : {1, 4}) {
      if (!bf16 && shift == 4) continue;  // 16-byte aligned for fp32
      const std::size_t n = layout.numel - static_cast<std::size_t>(shift);
      MirroredArray<std::int64_t> segments = shifted_segments(layout, shift);
      const Tensor x_gpu =
          (bf16 ? input.bf16.device_view() : input.f32.device_view()).slice(static_cast<std::size_t>(shift), n);
      const Tensor x_cpu =
          (bf16 ? input.bf16.host_view() : input.f32.host_view()).slice(static_cast<std::size_t>(shift), n);
      const double expected = cpu_squared_norm(x_cpu, segments.host_view(), 0.0, false);
      EXPECT_GT(expected, 0.0);
      EXPECT_NEAR(gpu_squared_norm(x_gpu, segments.device_view(), 0.0, false, stream), expected, 1e-12 * expected)
          << (bf16 ? "bf16" : "fp32") << " shifted by " << shift;
    }
  }
}

TEST(CudaSquaredNorm, IsBitwiseDeterministicAcrossRunsAndStreams) {
  ADAMANT_REQUIRE_GPU();
  std::mt19937_64 rng(33);
  const SegmentLayout layout = testing::random_layout(rng, 400, 0, 20, 100000);
  NormInput input(layout, 303);
  const Stream first(testing::gpu());
  const Stream second(testing::gpu());
  for (const bool bf16 : {false, true}) {
    const Tensor x = bf16 ? input.bf16.device_view() : input.f32.device_view();
    const double reference = gpu_squared_norm(x, input.segments.device_view(), 0.0, false, first);
    EXPECT_GT(reference, 0.0);
    for (int run = 0; run < 4; ++run) {
      const Stream& stream = run % 2 == 0 ? first : second;
      EXPECT_EQ(gpu_squared_norm(x, input.segments.device_view(), 0.0, false, stream), reference)
          << (bf16 ? "bf16" : "fp32") << " run " << run;
    }
  }
}

TEST(CudaSquaredNorm, NonFiniteInsideSegmentsOnlyPropagates) {
  ADAMANT_REQUIRE_GPU();
  // Segments [2, 10) and [12, 20) of 24 elements; element 11 is padding.
  MirroredArray<std::int64_t> segments(6, DType::i64);
  segments.host = {2, 10, 0, 12, 20, 1};
  segments.upload();
  MirroredArray<float> x(24, DType::f32);
  for (std::size_t i = 0; i < 24; ++i) x.host[i] = 0.5f * static_cast<float>(i);
  const Stream stream(testing::gpu());
  auto norm_with = [&](std::size_t index, float value) {
    std::vector<float> saved = x.host;
    x.host[index] = value;
    x.upload();
    x.host = saved;
    return gpu_squared_norm(x.device_view(), segments.device_view(), 0.0, false, stream);
  };
  double expected = 0.0;
  for (int i : {2, 3, 4, 5, 6, 7, 8, 9, 12, 13, 14, 15, 16, 17, 18, 19}) expected += 0.25 * i * i;
  EXPECT_EQ(norm_with(11, std::numeric_limits<float>::infinity()), expected);
  EXPECT_TRUE(std::isinf(norm_with(13, std::numeric_limits<float>::infinity())));
  EXPECT_TRUE(std::isnan(norm_with(5, std::numeric_limits<float>::quiet_NaN())));
}

TEST(CudaSquaredNorm, NoSegmentsGivesZeroOrKeepsTheOldValue) {
  ADAMANT_REQUIRE_GPU();
  MirroredArray<std::int64_t> no_segments(0, DType::i64);
  MirroredArray<float> x(100, DType::f32);
  for (auto& v : x.host) v = 3.0f;
  x.upload();
  const Stream stream(testing::gpu());
  EXPECT_EQ(gpu_squared_norm(x.device_view(), no_segments.device_view(), 7.25, true, stream), 7.25);
  EXPECT_EQ(gpu_squared_norm(x.device_view(), no_segments.device_view(), 7.25, false, stream), 0.0);
}

// Values for the element-wise tests: many binades, ties for bf16 rounding, fp16
// subnormals and overflows, signed zeros. No NaN: its payload after conversion is
// not part of the contract.
std::vector<float> element_values(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<float> values(n);
  for (std::size_t i = 0; i < n; ++i) {
    switch (i % 8) {
      case 0:
        values[i] = std::bit_cast<float>((static_cast<std::uint32_t>(rng()) & 0xffff0000u) | 0x8000u);
        break;
      case 1:
        values[i] = testing::random_magnitude(rng, -7.5, -4);
        break;  // fp16 subnormals
      case 2:
        values[i] = testing::random_magnitude(rng, 4.5, 5.5);
        break;  // around fp16 overflow
      case 3:
        values[i] = (i % 16 == 3) ? -0.0f : 0.0f;
        break;
      default:
        values[i] = testing::random_magnitude(rng, -3, 3);
        break;
    }
    if (!std::isfinite(values[i])) values[i] = 1.0f;
  }
  return values;
}

// A host array of `dtype` holding `values` converted by core/half.h.
template <typename T>
void fill_as(MirroredArray<T>& array, const std::vector<float>& values, DType dtype) {
  for (std::size_t i = 0; i < values.size(); ++i) {
    if constexpr (std::is_same_v<T, float>) {
      array.host[i] = values[i];
    } else {
      array.host[i] = dtype == DType::bf16 ? f32_to_bf16(values[i]) : f32_to_f16(values[i]);
    }
  }
  array.upload();
}

// Holds one array of any of fp32/bf16/fp16 for the parameterised tests.
struct AnyArray {
  AnyArray(std::size_t n, DType dtype, std::size_t offset)
      : dtype(dtype),
        f32(dtype == DType::f32 ? n : 0, DType::f32, offset),
        half(dtype == DType::f32 ? 0 : n, dtype, offset) {}
  void fill(const std::vector<float>& values) {
    if (dtype == DType::f32) {
      fill_as(f32, values, dtype);
    } else {
      fill_as(half, values, dtype);
    }
  }
  Tensor device_view() { return dtype == DType::f32 ? f32.device_view() : half.device_view(); }
  Tensor host_view() { return dtype == DType::f32 ? f32.host_view() : half.host_view(); }
  void expect_device_equals_host(const std::string& what) {
    if (dtype == DType::f32) {
      testing::expect_bitwise_equal(f32.download(), f32.host, what);
    } else {
      testing::expect_bitwise_equal(half.download(), half.host, what);
    }
  }
  DType dtype;
  MirroredArray<float> f32;
  MirroredArray<std::uint16_t> half;
};

std::string dtype_label(DType t) { return std::string(dtype_name(t)); }

using CastCase = std::tuple<DType, DType, bool>;
class CudaCast : public ::testing::TestWithParam<CastCase> {};

TEST_P(CudaCast, MatchesCpuBitwise) {
  ADAMANT_REQUIRE_GPU();
  const auto [src_dtype, dst_dtype, unaligned] = GetParam();
  const std::size_t n = 1'000'003;
  const std::size_t offset = unaligned ? 1 : 0;
  AnyArray src(n, src_dtype, offset);
  AnyArray dst(n, dst_dtype, offset);
  src.fill(element_values(n, 401));
  dst.fill(std::vector<float>(n, 0.0f));
  const Stream stream(testing::gpu());
  cast(src.device_view(), dst.device_view(), stream);
  stream.synchronize();
  cpu::cast(src.host_view(), dst.host_view());
  dst.expect_device_equals_host("cast " + dtype_label(src_dtype) + " to " + dtype_label(dst_dtype));
}

INSTANTIATE_TEST_SUITE_P(AllPairs, CudaCast,
                         ::testing::Combine(::testing::Values(DType::f32, DType::bf16, DType::f16),
                                            ::testing::Values(DType::f32, DType::bf16, DType::f16), ::testing::Bool()),
                         [](const ::testing::TestParamInfo<CastCase>& info) {
                           return dtype_label(std::get<0>(info.param)) + "To" + dtype_label(std::get<1>(info.param)) +
                                  (std::get<2>(info.param) ? "Unaligned" : "Aligned");
                         });

using ScaleCase = std::tuple<DType, bool>;
class CudaScale : public ::testing::TestWithParam<ScaleCase> {};

TEST_P(CudaScale, MatchesCpuBitwise) {
  ADAMANT_REQUIRE_GPU();
  const auto [dtype, unaligned] = GetParam();
  const std::size_t n = 777'777;
  AnyArray x(n, dtype, unaligned ? 1 : 0);
  x.fill(element_values(n, 402));
  const Stream stream(testing::gpu());
  scale(x.device_view(), 0.3711f, stream);
  stream.synchronize();
  cpu::scale(x.host_view(), 0.3711f);
  x.expect_device_equals_host("scale " + dtype_label(dtype));
}

INSTANTIATE_TEST_SUITE_P(AllTypes, CudaScale,
                         ::testing::Combine(::testing::Values(DType::f32, DType::bf16, DType::f16), ::testing::Bool()),
                         [](const ::testing::TestParamInfo<ScaleCase>& info) {
                           return dtype_label(std::get<0>(info.param)) +
                                  (std::get<1>(info.param) ? "Unaligned" : "Aligned");
                         });

// fp32 or bf16 into fp32, and fp32 into bf16 (a bf16 gradient buffer: each sum rounded once).
class CudaAccumulate : public ::testing::TestWithParam<CastCase> {};

TEST_P(CudaAccumulate, MatchesCpuBitwise) {
  ADAMANT_REQUIRE_GPU();
  const auto [src_dtype, dst_dtype, unaligned] = GetParam();
  const std::size_t n = 654'321;
  const std::size_t offset = unaligned ? 1 : 0;
  AnyArray src(n, src_dtype, offset);
  AnyArray dst(n, dst_dtype, offset);
  src.fill(element_values(n, 403));
  dst.fill(element_values(n, 404));
  const Stream stream(testing::gpu());
  accumulate(src.device_view(), dst.device_view(), stream);
  stream.synchronize();
  cpu::accumulate(src.host_view(), dst.host_view());
  dst.expect_device_equals_host("accumulate " + dtype_label(src_dtype) + " into " + dtype_label(dst_dtype));
}

INSTANTIATE_TEST_SUITE_P(
    IntoFp32AndBf16, CudaAccumulate,
    ::testing::Values(CastCase{DType::f32, DType::f32, false}, CastCase{DType::f32, DType::f32, true},
                      CastCase{DType::bf16, DType::f32, false}, CastCase{DType::bf16, DType::f32, true},
                      CastCase{DType::f32, DType::bf16, false}, CastCase{DType::f32, DType::bf16, true}),
    [](const ::testing::TestParamInfo<CastCase>& info) {
      return dtype_label(std::get<0>(info.param)) + "Into" + dtype_label(std::get<1>(info.param)) +
             (std::get<2>(info.param) ? "Unaligned" : "Aligned");
    });

TEST(CudaAccumulateOperands, RefusesBf16IntoBf16) {
  ADAMANT_REQUIRE_GPU();
  MirroredArray<std::uint16_t> src(16, DType::bf16), dst(16, DType::bf16);
  const Stream stream(testing::gpu());
  EXPECT_THROW(accumulate(src.device_view(), dst.device_view(), stream), Error);
}

TEST(CudaFillZero, ZeroesExactlyTheView) {
  ADAMANT_REQUIRE_GPU();
  const std::size_t n = 100'003;
  MirroredArray<std::uint16_t> x(n, DType::bf16);
  for (std::size_t i = 0; i < n; ++i) x.host[i] = static_cast<std::uint16_t>(0x3f80u + i % 100);
  x.upload();
  const Stream stream(testing::gpu());
  fill_zero(x.device_view().slice(3, n - 10), stream);
  stream.synchronize();
  const std::vector<std::uint16_t> out = x.download();
  for (std::size_t i = 0; i < n; ++i) {
    const bool inside = i >= 3 && i < n - 7;
    ASSERT_EQ(out[i], inside ? 0 : x.host[i]) << "element " << i;
  }
}

}  // namespace
}  // namespace adamant::kernels
