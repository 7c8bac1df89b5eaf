// Element-wise model kernels on bf16 data (kernels/gelu.h, residual.h, dropout.h):
// fp32 math, one fp32 -> bf16 rounding per output, 16-byte accesses where every
// operand is aligned (8-byte groups of 4 for dropout, whose decisions come in fours).
#include <cstdint>

#include "adamant/kernels/cuda/column_sums.cuh"
#include "adamant/kernels/cuda/column_sums.h"
#include "adamant/kernels/cuda/model_launchers_pointwise.h"
#include "adamant/kernels/cuda/pointwise_model_device.cuh"
#include "adamant/kernels/cuda/pointwise_model_philox.cuh"
#include "adamant/kernels/gelu_launchers.h"

namespace adamant::kernels::cuda {

using launchers::stream_of;

namespace {

using column_sums_detail::sum_columns_of_rows;
using pointwise_detail::dropout_value;
using pointwise_detail::first_sample_of;
using pointwise_detail::kVectorWidth;
using pointwise_detail::load_bf16;
using pointwise_detail::store_bf16;
using pointwise_detail::store_packed_bf16;

constexpr int kThreads = 256;
// Launch bounds hold every kernel to the registers that let this many blocks stay resident,
// so a grid capped at this many blocks a multiprocessor runs in one wave.
constexpr int kBlocksPerMultiprocessor = 5;
// The kernels that also sum columns hold eight running sums more: fewer blocks, no spills.
constexpr int kColumnSumBlocksPerMultiprocessor = 4;
// The unroll of those kernels' row loop (sum_columns_of_rows).
constexpr int kColumnSumUnroll = 2;
static_assert(column_sums_detail::kVectorColumns == kVectorWidth, "a thread's columns are one 16-byte group");

// The constants of the CPU kernels (pointwise_model_cpu.cpp), rounded to fp32 the same way.
constexpr float kInvSqrt2 = static_cast<float>(0.70710678118654752440);
constexpr float kInvSqrt2Pi = static_cast<float>(0.39894228040143267794);
constexpr float kMinusHalfLog2e = static_cast<float>(-0.72134752044448170368);  // -log2(e) / 2

// sqrt(2 / pi) and the cubic coefficient of GPT-2's tanh approximation (as in the CPU kernels).
constexpr float kSqrt2OverPi = static_cast<float>(0.79788456080286535588);
constexpr float kGeluCubic = 0.044715f;

// The standard normal distribution at x: its CDF Phi(x) and e^(-x^2 / 2), which its density
// and the CDF's tail share. One exponential and one reciprocal on the special function
// unit instead of erff's range-selected polynomials and expf: the GELU kernels stay bound
// by memory rather than by arithmetic.
struct Normal {
  float cdf;
  float gaussian;  // e^(-x^2 / 2)
};
__device__ __forceinline__ Normal standard_normal(float x) {
  // erfc(z) / 2 = t e^(-z^2) P(t), t = 1 / (1 + z / 2), z = |x| / sqrt(2): P is a degree-8
  // polynomial fitted (weighted least squares) to the relative error over z in [0, 10],
  // within 3e-7 there in fp32, about erff's accuracy; beyond z = 10, e^(-z^2) is 0 in fp32
  // anyway. Coefficients from t^0 up.
  constexpr float kHalfErfcFit[9] = {1.410436332e-01f,  1.411794424e-01f,  1.216163486e-01f,
                                     1.010704041e-01f,  -1.262773480e-02f, 1.379855424e-01f,
                                     -2.426408678e-01f, 1.418052912e-01f,  -2.943209931e-02f};
  const float z = fabsf(x) * kInvSqrt2;
  const float t = detail::fast_reciprocal(fmaf(0.5f, z, 1.0f));
  float fit = kHalfErfcFit[8];
#pragma unroll
  for (int i = 7; i >= 0; --i) fit = fmaf(fit, t, kHalfErfcFit[i]);
  const float gaussian = detail::fast_exp2(x * x * kMinusHalfLog2e);
  const float half_erfc = t * fit * gaussian;  // Phi(-|x|)
  return {x >= 0.0f ? 1.0f - half_erfc : half_erfc, gaussian};
}

// GPT-2's tanh form: 0.5 x (1 + tanh(u)), u = sqrt(2 / pi) (x + 0.044715 x^3).
__device__ __forceinline__ float tanh_gelu(float v) {
  return 0.5f * v * (1.0f + tanhf(kSqrt2OverPi * (v + kGeluCubic * v * v * v)));
}
// d/dx [0.5 x (1 + tanh(u))] = 0.5 (1 + tanh(u)) + 0.5 x (1 - tanh(u)^2) du/dx
__device__ __forceinline__ float tanh_gelu_derivative(float v) {
  const float t = tanhf(kSqrt2OverPi * (v + kGeluCubic * v * v * v));
  const float d_inner = kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * v * v);
  return 0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * d_inner;
}

// A GELU value and its derivative at one point, from one evaluation of the normal distribution.
struct GeluPoint {
  float value;
  float derivative;
};
template <bool kTanh>
__device__ __forceinline__ GeluPoint gelu_point(float v) {
  if constexpr (kTanh) {
    return {tanh_gelu(v), tanh_gelu_derivative(v)};
  } else {
    // x Phi(x), and d/dx [x Phi(x)] = Phi(x) + x phi(x).
    const Normal normal = standard_normal(v);
    return {v * normal.cdf, fmaf(v * kInvSqrt2Pi, normal.gaussian, normal.cdf)};
  }
}

// What fn returns for one element: kOutputs values, one per output array.
template <int kOutputs>
struct Results {
  float value[kOutputs];
};

// outs[o][i] = fn(a[i], b[i]).value[o] (b unused when null) over [0, n) in groups of 8: one
// 16-byte access per operand for a whole aligned group, scalar ones for the tail. A thread
// takes kGroups groups a grid stride apart per step and loads them all before computing, so
// that enough bytes are in flight to keep the memory busy. Each element is read and written
// by one thread, so an output may alias a or b (but not another output).
template <bool kVectorized, int kOutputs, typename Fn>
__device__ __forceinline__ void transform_groups(const std::uint16_t* a, const std::uint16_t* b,
                                                 std::uint16_t* const (&outs)[kOutputs], std::int64_t n, Fn fn) {
  constexpr int kGroups = 2;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x * kVectorWidth;
  // Elements [first, first + kWidth): fn over them, results stored.
  auto transform = [&]<int kWidth>(std::int64_t first, const float(&va)[kWidth], const float(&vb)[kWidth]) {
    float results[kOutputs][kWidth];
#pragma unroll
    for (int i = 0; i < kWidth; ++i) {
      const Results<kOutputs> r = fn(va[i], vb[i]);
#pragma unroll
      for (int o = 0; o < kOutputs; ++o) results[o][i] = r.value[o];
    }
#pragma unroll
    for (int o = 0; o < kOutputs; ++o) store_bf16<kWidth>(outs[o] + first, results[o]);
  };
  for (std::int64_t first = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * kVectorWidth;
       first < n; first += kGroups * stride) {
    if (kVectorized && first + (kGroups - 1) * stride + kVectorWidth <= n) {
      float va[kGroups][kVectorWidth];
      float vb[kGroups][kVectorWidth] = {};
#pragma unroll
      for (int g = 0; g < kGroups; ++g) load_bf16<kVectorWidth>(a + first + g * stride, va[g]);
      if (b != nullptr) {
#pragma unroll
        for (int g = 0; g < kGroups; ++g) load_bf16<kVectorWidth>(b + first + g * stride, vb[g]);
      }
#pragma unroll
      for (int g = 0; g < kGroups; ++g) transform.template operator()<kVectorWidth>(first + g * stride, va[g], vb[g]);
      continue;
    }
    for (std::int64_t group = first; group < n && group < first + kGroups * stride; group += stride) {
      if (kVectorized && group + kVectorWidth <= n) {
        float va[kVectorWidth];
        float vb[kVectorWidth] = {};
        load_bf16<kVectorWidth>(a + group, va);
        if (b != nullptr) load_bf16<kVectorWidth>(b + group, vb);
        transform.template operator()<kVectorWidth>(group, va, vb);
        continue;
      }
      for (std::int64_t i = group; i < n && i < group + kVectorWidth; ++i) {
        float va[1];
        float vb[1] = {0.0f};
        load_bf16<1>(a + i, va);
        if (b != nullptr) load_bf16<1>(b + i, vb);
        transform.template operator()<1>(i, va, vb);
      }
    }
  }
}

template <bool kVectorized, bool kTanh>
__global__ void __launch_bounds__(kThreads, kBlocksPerMultiprocessor)
    gelu_forward_kernel(const std::uint16_t* x, std::uint16_t* out, std::int64_t n) {
  transform_groups<kVectorized, 1>(x, nullptr, {out}, n,
                                   [](float v, float) { return Results<1>{{gelu_point<kTanh>(v).value}}; });
}

// a = d_out, b = x.
template <bool kVectorized, bool kTanh>
__global__ void __launch_bounds__(kThreads, kBlocksPerMultiprocessor)
    gelu_backward_kernel(const std::uint16_t* d_out, const std::uint16_t* x, std::uint16_t* d_x, std::int64_t n) {
  transform_groups<kVectorized, 1>(
      d_out, x, {d_x}, n, [](float dy, float v) { return Results<1>{{dy * gelu_point<kTanh>(v).derivative}}; });
}

// gelu_backward_kernel that also writes gelu(x), the forward's output, into `out`.
template <bool kVectorized, bool kTanh>
__global__ void __launch_bounds__(kThreads, kBlocksPerMultiprocessor)
    gelu_backward_rematerializing_kernel(const std::uint16_t* d_out, const std::uint16_t* x, std::uint16_t* d_x,
                                         std::uint16_t* out, std::int64_t n) {
  transform_groups<kVectorized, 2>(d_out, x, {d_x, out}, n, [](float dy, float v) {
    const GeluPoint point = gelu_point<kTanh>(v);
    return Results<2>{{dy * point.derivative, point.value}};
  });
}

// gelu_backward_kernel (and with kRematerialize the rematerializing one) that also sums
// d_x's columns (sum_columns_of_rows).
template <bool kTanh, bool kRematerialize>
__global__ void __launch_bounds__(column_sums_detail::kBlockThreads, kColumnSumBlocksPerMultiprocessor)
    gelu_backward_column_sums_kernel(const std::uint16_t* d_out, const std::uint16_t* x, std::uint16_t* d_x,
                                     std::uint16_t* out, std::int64_t rows, std::int64_t cols,
                                     std::int64_t rows_per_slice, float* partials) {
  sum_columns_of_rows<kColumnSumUnroll>(rows, cols, rows_per_slice, partials, [&](std::int64_t at) {
    float dy[kVectorWidth];
    float v[kVectorWidth];
    load_bf16<kVectorWidth>(d_out + at, dy);
    load_bf16<kVectorWidth>(x + at, v);
    float grad[kVectorWidth];
    float value[kVectorWidth];
#pragma unroll
    for (int i = 0; i < kVectorWidth; ++i) {
      const GeluPoint point = gelu_point<kTanh>(v[i]);
      grad[i] = dy[i] * point.derivative;
      value[i] = point.value;
    }
    if constexpr (kRematerialize) store_bf16<kVectorWidth>(out + at, value);
    return store_packed_bf16(d_x + at, grad);
  });
}

template <bool kVectorized>
__global__ void __launch_bounds__(kThreads, kBlocksPerMultiprocessor)
    residual_add_kernel(const std::uint16_t* a, const std::uint16_t* b, std::uint16_t* out, std::int64_t n) {
  transform_groups<kVectorized, 1>(a, b, {out}, n, [](float u, float v) { return Results<1>{{u + v}}; });
}

// One thread per Philox group (4 elements of one sample, fewer at the end of a sample
// when sample_numel % 4 != 0) overlapping the global element range [first_element,
// first_element + numel); global group g is group g % groups_per_sample of sample
// g / groups_per_sample, as the CPU kernel walks them. kVectorized: sample_numel % 4
// == 0, first_element % 4 == 0 and in/out 8-byte aligned, so every whole group inside
// the range is one aligned 8-byte access; the groups cut by the range's end are scalar.
// A thread divides by groups_per_sample once: its later groups are one grid stride apart,
// so (sample, group) advances by that stride's quotient and remainder (64-bit divisions
// cost as much as the Philox draw).
template <bool kVectorized>
__global__ void __launch_bounds__(kThreads, kBlocksPerMultiprocessor)
    dropout_kernel(const std::uint16_t* in, std::uint16_t* out, std::int64_t numel, std::int64_t sample_numel,
                   std::int64_t group_begin, std::int64_t group_count, DropoutParams params) {
  constexpr int kGroup = 4;
  const std::int64_t groups_per_sample = (sample_numel + kGroup - 1) / kGroup;
  const std::uint64_t first_sample = first_sample_of(params);
  const auto first_element = static_cast<std::int64_t>(params.first_element);
  const std::int64_t end_element = first_element + numel;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  const std::int64_t stride_samples = stride / groups_per_sample;
  const std::int64_t stride_groups = stride - stride_samples * groups_per_sample;
  std::int64_t local = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  std::int64_t sample = (group_begin + local) / groups_per_sample;
  std::int64_t group = group_begin + local - sample * groups_per_sample;
  for (; local < group_count; local += stride) {
    const PhiloxWords bits = pointwise_detail::dropout_bits(
        params.seed, first_sample + static_cast<std::uint64_t>(sample), params.site, static_cast<std::uint64_t>(group));
    const std::int64_t group_start = sample * sample_numel + group * kGroup;  // global element index
    if (kVectorized && group_start >= first_element && group_start + kGroup <= end_element) {
      float values[kGroup];
      load_bf16<kGroup>(in + (group_start - first_element), values);
#pragma unroll
      for (int lane = 0; lane < kGroup; ++lane) {
        values[lane] = dropout_value(values[lane], bits.word[lane], params.probability, params.keep_scale);
      }
      store_bf16<kGroup>(out + (group_start - first_element), values);
    } else {
      const std::int64_t sample_end = (sample + 1) * sample_numel;
      std::int64_t hi = group_start + kGroup < sample_end ? group_start + kGroup : sample_end;
      hi = hi < end_element ? hi : end_element;
      for (std::int64_t e = group_start > first_element ? group_start : first_element; e < hi; ++e) {
        float value[1];
        load_bf16<1>(in + (e - first_element), value);
        value[0] = dropout_value(value[0], bits.word[e - group_start], params.probability, params.keep_scale);
        store_bf16<1>(out + (e - first_element), value);
      }
    }
    sample += stride_samples;
    group += stride_groups;
    if (group >= groups_per_sample) {
      group -= groups_per_sample;
      ++sample;
    }
  }
}

// dropout_kernel's common case, whole samples: sample_numel, the range's start and its
// length are multiples of 16 and both pointers 16-byte aligned, so a thread's chunk of
// four Philox groups (16 elements) is two 16-byte accesses inside one sample. Twice the
// bytes a thread has in flight, four draws between a load and its store, no tail.
constexpr int kChunkGroups = 4;
constexpr int kChunkElements = 4 * kChunkGroups;

__global__ void __launch_bounds__(kThreads, kBlocksPerMultiprocessor)
    dropout_chunks_kernel(const std::uint16_t* in, std::uint16_t* out, std::int64_t chunk_count,
                          std::int64_t groups_per_sample, std::int64_t group_begin, DropoutParams params) {
  const std::uint64_t first_sample = first_sample_of(params);
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;  // in chunks
  const std::int64_t stride_samples = stride * kChunkGroups / groups_per_sample;
  const std::int64_t stride_groups = stride * kChunkGroups - stride_samples * groups_per_sample;
  std::int64_t chunk = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  std::int64_t sample = (group_begin + chunk * kChunkGroups) / groups_per_sample;
  std::int64_t group = group_begin + chunk * kChunkGroups - sample * groups_per_sample;
  for (; chunk < chunk_count; chunk += stride) {
    float values[2][8];
    load_bf16<8>(in + chunk * kChunkElements, values[0]);
    load_bf16<8>(in + chunk * kChunkElements + 8, values[1]);
#pragma unroll
    for (int g = 0; g < kChunkGroups; ++g) {
      const PhiloxWords bits =
          pointwise_detail::dropout_bits(params.seed, first_sample + static_cast<std::uint64_t>(sample), params.site,
                                         static_cast<std::uint64_t>(group + g));
#pragma unroll
      for (int lane = 0; lane < 4; ++lane) {
        float& value = values[g / 2][(g % 2) * 4 + lane];
        value = dropout_value(value, bits.word[lane], params.probability, params.keep_scale);
      }
    }
    store_bf16<8>(out + chunk * kChunkElements, values[0]);
    store_bf16<8>(out + chunk * kChunkElements + 8, values[1]);
    sample += stride_samples;
    group += stride_groups;
    if (group >= groups_per_sample) {
      group -= groups_per_sample;
      ++sample;
    }
  }
}

// dropout that also sums out's columns (sum_columns_of_rows): rows of a multiple of 8
// elements, samples and first_element too, so that a thread's 8 elements are two whole
// Philox groups of one sample.
__global__ void __launch_bounds__(column_sums_detail::kBlockThreads, kColumnSumBlocksPerMultiprocessor)
    dropout_column_sums_kernel(const std::uint16_t* in, std::uint16_t* out, std::int64_t rows, std::int64_t cols,
                               std::int64_t rows_per_slice, float* partials, std::int64_t sample_numel,
                               DropoutParams params) {
  const std::uint64_t first_sample = first_sample_of(params);
  sum_columns_of_rows<kColumnSumUnroll>(rows, cols, rows_per_slice, partials, [&](std::int64_t at) {
    float values[kVectorWidth];
    load_bf16<kVectorWidth>(in + at, values);
    const std::int64_t element = static_cast<std::int64_t>(params.first_element) + at;
    const std::int64_t sample = element / sample_numel;
    const std::int64_t group = (element - sample * sample_numel) / 4;
#pragma unroll
    for (int g = 0; g < 2; ++g) {
      const PhiloxWords bits =
          pointwise_detail::dropout_bits(params.seed, first_sample + static_cast<std::uint64_t>(sample), params.site,
                                         static_cast<std::uint64_t>(group + g));
#pragma unroll
      for (int lane = 0; lane < 4; ++lane) {
        float& value = values[4 * g + lane];
        value = dropout_value(value, bits.word[lane], params.probability, params.keep_scale);
      }
    }
    return store_packed_bf16(out + at, values);
  });
}

int elementwise_grid(std::int64_t n, const CudaLaunch& launch) {
  return pointwise_detail::capped_grid((n + kVectorWidth - 1) / kVectorWidth, kThreads, launch.multiprocessors,
                                       kBlocksPerMultiprocessor);
}

}  // namespace

int gelu_forward(const std::uint16_t* x, std::uint16_t* out, std::int64_t n, bool tanh_form, const CudaLaunch& launch) {
  if (n <= 0) return cudaSuccess;
  auto* kernel = tanh_form ? (launch.vectorized ? gelu_forward_kernel<true, true> : gelu_forward_kernel<false, true>)
                           : (launch.vectorized ? gelu_forward_kernel<true, false> : gelu_forward_kernel<false, false>);
  kernel<<<elementwise_grid(n, launch), kThreads, 0, stream_of(launch)>>>(x, out, n);
  return cudaGetLastError();
}

namespace {

// The element-wise GELU backward alone.
cudaError_t launch_gelu_backward(const std::uint16_t* d_out, const std::uint16_t* x, std::uint16_t* d_x,
                                 std::uint16_t* out, std::int64_t n, bool tanh_form, const CudaLaunch& launch) {
  if (n <= 0) return cudaSuccess;
  const int grid = elementwise_grid(n, launch);
  if (out != nullptr) {
    auto* kernel = tanh_form ? (launch.vectorized ? gelu_backward_rematerializing_kernel<true, true>
                                                  : gelu_backward_rematerializing_kernel<false, true>)
                             : (launch.vectorized ? gelu_backward_rematerializing_kernel<true, false>
                                                  : gelu_backward_rematerializing_kernel<false, false>);
    kernel<<<grid, kThreads, 0, stream_of(launch)>>>(d_out, x, d_x, out, n);
    return cudaGetLastError();
  }
  auto* kernel = tanh_form
                     ? (launch.vectorized ? gelu_backward_kernel<true, true> : gelu_backward_kernel<false, true>)
                     : (launch.vectorized ? gelu_backward_kernel<true, false> : gelu_backward_kernel<false, false>);
  kernel<<<grid, kThreads, 0, stream_of(launch)>>>(d_out, x, d_x, n);
  return cudaGetLastError();
}

// An element-wise kernel's bf16 output [rows, column_sums.columns] and its column sums:
// where `fusable`, one column-summing kernel, `fused(grid, block, rows_per_slice,
// partials)`, launched for about one wave; else `plain()` (returning its status), then
// the column sums of what it wrote to `output`.
template <typename Fused, typename Plain>
cudaError_t with_column_sums(bool fusable, const std::uint16_t* output, std::int64_t rows,
                             const ColumnSumsOut& column_sums, const CudaLaunch& launch, Fused fused, Plain plain) {
  if (fusable) {
    return column_sums_detail::launch_column_slices(
        rows, column_sums_detail::kVectorBlockColumns,
        static_cast<std::int64_t>(launch.multiprocessors) * kColumnSumBlocksPerMultiprocessor, column_sums,
        stream_of(launch), fused);
  }
  const cudaError_t status = plain();
  if (status != cudaSuccess) return status;
  return launchers::column_sums(output, DType::bf16, rows, column_sums.columns, column_sums.scratch,
                                column_sums.scratch_floats, column_sums.sums, stream_of(launch));
}

}  // namespace

int gelu_backward(const std::uint16_t* d_out, const std::uint16_t* x, std::uint16_t* d_x, std::uint16_t* out,
                  std::int64_t n, bool tanh_form, const CudaLaunch& launch, const ColumnSumsOut& column_sums) {
  if (column_sums.sums == nullptr) return launch_gelu_backward(d_out, x, d_x, out, n, tanh_form, launch);
  const std::int64_t cols = column_sums.columns;
  if (cols <= 0 || n % cols != 0) return cudaErrorInvalidValue;
  // n == 0 needs no case of its own: either way, one slice of no rows writes zero sums.
  const std::int64_t rows = n / cols;
  // Unaligned or ragged rows: the plain kernel, then the column sums.
  const bool fusable = launch.vectorized && cols % kVectorWidth == 0;
  return with_column_sums(
      fusable, d_x, rows, column_sums, launch,
      [&](dim3 grid, dim3 block, std::int64_t rows_per_slice, float* partials) {
        const bool remat = out != nullptr;
        auto* kernel =
            tanh_form
                ? (remat ? gelu_backward_column_sums_kernel<true, true> : gelu_backward_column_sums_kernel<true, false>)
                : (remat ? gelu_backward_column_sums_kernel<false, true>
                         : gelu_backward_column_sums_kernel<false, false>);
        kernel<<<grid, block, 0, stream_of(launch)>>>(d_out, x, d_x, out, rows, cols, rows_per_slice, partials);
      },
      [&] { return launch_gelu_backward(d_out, x, d_x, out, n, tanh_form, launch); });
}

int residual_add(const std::uint16_t* a, const std::uint16_t* b, std::uint16_t* out, std::int64_t n,
                 const CudaLaunch& launch) {
  if (n <= 0) return cudaSuccess;
  auto* kernel = launch.vectorized ? residual_add_kernel<true> : residual_add_kernel<false>;
  kernel<<<elementwise_grid(n, launch), kThreads, 0, stream_of(launch)>>>(a, b, out, n);
  return cudaGetLastError();
}

namespace {

// The dropout alone.
cudaError_t launch_dropout(const std::uint16_t* in, std::uint16_t* out, std::int64_t numel, std::int64_t sample_numel,
                           const DropoutParams& params, const CudaLaunch& launch) {
  if (numel <= 0) return cudaSuccess;
  if (sample_numel <= 0 || params.first_element % 4 != 0) return cudaErrorInvalidValue;
  if (params.probability <= 0.0f) {  // identity, as the CPU kernel
    if (in == out) return cudaSuccess;
    return cudaMemcpyAsync(out, in, static_cast<std::size_t>(numel) * sizeof(std::uint16_t), cudaMemcpyDeviceToDevice,
                           stream_of(launch));
  }
  // The global Philox groups that overlap [first_element, first_element + numel).
  const std::int64_t groups_per_sample = (sample_numel + 3) / 4;
  auto group_of = [&](std::int64_t element) {
    return (element / sample_numel) * groups_per_sample + (element % sample_numel) / 4;
  };
  const auto first_element = static_cast<std::int64_t>(params.first_element);
  const std::int64_t group_begin = group_of(first_element);
  const std::int64_t group_count = group_of(first_element + numel - 1) + 1 - group_begin;
  const bool whole_chunks = launch.vectorized && sample_numel % kChunkElements == 0 &&
                            first_element % kChunkElements == 0 && numel % kChunkElements == 0 &&
                            reinterpret_cast<std::uintptr_t>(in) % 16 == 0 &&
                            reinterpret_cast<std::uintptr_t>(out) % 16 == 0;
  if (whole_chunks) {
    const std::int64_t chunk_count = numel / kChunkElements;
    const int grid =
        pointwise_detail::capped_grid(chunk_count, kThreads, launch.multiprocessors, kBlocksPerMultiprocessor);
    dropout_chunks_kernel<<<grid, kThreads, 0, stream_of(launch)>>>(in, out, chunk_count, groups_per_sample,
                                                                    group_begin, params);
    return cudaGetLastError();
  }
  const int grid =
      pointwise_detail::capped_grid(group_count, kThreads, launch.multiprocessors, kBlocksPerMultiprocessor);
  auto* kernel = launch.vectorized ? dropout_kernel<true> : dropout_kernel<false>;
  kernel<<<grid, kThreads, 0, stream_of(launch)>>>(in, out, numel, sample_numel, group_begin, group_count, params);
  return cudaGetLastError();
}

}  // namespace

int dropout(const std::uint16_t* in, std::uint16_t* out, std::int64_t numel, std::int64_t sample_numel,
            const DropoutParams& params, const CudaLaunch& launch, const ColumnSumsOut& column_sums) {
  if (column_sums.sums == nullptr) return launch_dropout(in, out, numel, sample_numel, params, launch);
  const std::int64_t cols = column_sums.columns;
  if (cols <= 0 || numel % cols != 0) return cudaErrorInvalidValue;
  const std::int64_t rows = numel / cols;
  // Fused where a thread's 8 elements are two whole Philox groups of one sample, aligned;
  // else the dropout (or its copy for p = 0), then the column sums.
  const bool fusable = params.probability > 0.0f && launch.vectorized && cols % kVectorWidth == 0 &&
                       sample_numel % kVectorWidth == 0 && params.first_element % kVectorWidth == 0 &&
                       reinterpret_cast<std::uintptr_t>(in) % 16 == 0 &&
                       reinterpret_cast<std::uintptr_t>(out) % 16 == 0;
  return with_column_sums(
      fusable, out, rows, column_sums, launch,
      [&](dim3 grid, dim3 block, std::int64_t rows_per_slice, float* partials) {
        dropout_column_sums_kernel<<<grid, block, 0, stream_of(launch)>>>(in, out, rows, cols, rows_per_slice, partials,
                                                                          sample_numel, params);
      },
      [&] { return launch_dropout(in, out, numel, sample_numel, params, launch); });
}

}  // namespace adamant::kernels::cuda
