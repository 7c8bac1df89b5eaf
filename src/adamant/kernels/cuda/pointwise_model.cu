// Element-wise model kernels on bf16 data (kernels/gelu.h, residual.h, dropout.h):
// fp32 math, one fp32 -> bf16 rounding per output, 16-byte accesses where every
// operand is aligned (8-byte groups of 4 for dropout, whose decisions come in fours).
#include <cstdint>

#include "adamant/kernels/cuda/model_launchers_pointwise.h"
#include "adamant/kernels/cuda/pointwise_model_device.cuh"
#include "adamant/kernels/cuda/pointwise_model_philox.cuh"

namespace adamant::kernels::cuda {

using launchers::stream_of;

namespace {

using pointwise_detail::kVectorWidth;
using pointwise_detail::load_bf16;
using pointwise_detail::store_bf16;

constexpr int kThreads = 256;
constexpr int kBlocksPerMultiprocessor = 8;

// The constants of the CPU kernels (pointwise_model_cpu.cpp), rounded to fp32 the same way.
constexpr float kInvSqrt2 = static_cast<float>(0.70710678118654752440);
constexpr float kInvSqrt2Pi = static_cast<float>(0.39894228040143267794);

// sqrt(2 / pi) and the cubic coefficient of GPT-2's tanh approximation (as in the CPU kernels).
constexpr float kSqrt2OverPi = static_cast<float>(0.79788456080286535588);
constexpr float kGeluCubic = 0.044715f;

template <bool kTanh>
__device__ __forceinline__ float gelu(float v) {
  if constexpr (kTanh) {
    return 0.5f * v * (1.0f + tanhf(kSqrt2OverPi * (v + kGeluCubic * v * v * v)));
  } else {
    return 0.5f * v * (1.0f + erff(v * kInvSqrt2));
  }
}

template <bool kTanh>
__device__ __forceinline__ float gelu_derivative(float v) {
  if constexpr (kTanh) {
    // d/dx [0.5 x (1 + tanh(u))] = 0.5 (1 + tanh(u)) + 0.5 x (1 - tanh(u)^2) du/dx
    const float t = tanhf(kSqrt2OverPi * (v + kGeluCubic * v * v * v));
    const float d_inner = kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * v * v);
    return 0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * d_inner;
  } else {
    // d/dx [x * Phi(x)] = Phi(x) + x * phi(x).
    const float cdf = 0.5f * (1.0f + erff(v * kInvSqrt2));
    const float pdf = kInvSqrt2Pi * expf(-0.5f * v * v);
    return cdf + v * pdf;
  }
}

// out[i] = fn(a[i], b[i]) (b unused when null) over [0, n) in groups of 8: one
// 16-byte access per operand for a whole aligned group, scalar ones for the tail.
// Each element is read and written by one thread, so out may alias a or b.
template <bool kVectorized, typename Fn>
__device__ __forceinline__ void transform_groups(const std::uint16_t* a, const std::uint16_t* b, std::uint16_t* out,
                                                 std::int64_t n, Fn fn) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x * kVectorWidth;
  for (std::int64_t first = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * kVectorWidth;
       first < n; first += stride) {
    if (kVectorized && first + kVectorWidth <= n) {
      float va[kVectorWidth];
      float vb[kVectorWidth] = {};
      load_bf16<kVectorWidth>(a + first, va);
      if (b != nullptr) load_bf16<kVectorWidth>(b + first, vb);
#pragma unroll
      for (int i = 0; i < kVectorWidth; ++i) va[i] = fn(va[i], vb[i]);
      store_bf16<kVectorWidth>(out + first, va);
    } else {
      for (std::int64_t i = first; i < n && i < first + kVectorWidth; ++i) {
        float va[1];
        float vb[1] = {0.0f};
        load_bf16<1>(a + i, va);
        if (b != nullptr) load_bf16<1>(b + i, vb);
        va[0] = fn(va[0], vb[0]);
        store_bf16<1>(out + i, va);
      }
    }
  }
}

template <bool kVectorized, bool kTanh>
__global__ void __launch_bounds__(kThreads)
    gelu_forward_kernel(const std::uint16_t* x, std::uint16_t* out, std::int64_t n) {
  transform_groups<kVectorized>(x, nullptr, out, n, [](float v, float) { return gelu<kTanh>(v); });
}

// a = d_out, b = x.
template <bool kVectorized, bool kTanh>
__global__ void __launch_bounds__(kThreads)
    gelu_backward_kernel(const std::uint16_t* d_out, const std::uint16_t* x, std::uint16_t* d_x, std::int64_t n) {
  transform_groups<kVectorized>(d_out, x, d_x, n, [](float dy, float v) { return dy * gelu_derivative<kTanh>(v); });
}

template <bool kVectorized>
__global__ void __launch_bounds__(kThreads)
    residual_add_kernel(const std::uint16_t* a, const std::uint16_t* b, std::uint16_t* out, std::int64_t n) {
  transform_groups<kVectorized>(a, b, out, n, [](float u, float v) { return u + v; });
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
__global__ void __launch_bounds__(kThreads)
    dropout_kernel(const std::uint16_t* in, std::uint16_t* out, std::int64_t numel, std::int64_t sample_numel,
                   std::int64_t group_begin, std::int64_t group_count, DropoutParams params) {
  constexpr int kGroup = 4;
  const std::int64_t groups_per_sample = (sample_numel + kGroup - 1) / kGroup;
  const auto first_element = static_cast<std::int64_t>(params.first_element);
  const std::int64_t end_element = first_element + numel;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  const std::int64_t stride_samples = stride / groups_per_sample;
  const std::int64_t stride_groups = stride - stride_samples * groups_per_sample;
  std::int64_t local = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  std::int64_t sample = (group_begin + local) / groups_per_sample;
  std::int64_t group = group_begin + local - sample * groups_per_sample;
  for (; local < group_count; local += stride) {
    const PhiloxWords bits =
        pointwise_detail::dropout_bits(params.seed, params.first_sample_index + static_cast<std::uint64_t>(sample),
                                       params.site, static_cast<std::uint64_t>(group));
    const std::int64_t group_start = sample * sample_numel + group * kGroup;  // global element index
    if (kVectorized && group_start >= first_element && group_start + kGroup <= end_element) {
      float values[kGroup];
      load_bf16<kGroup>(in + (group_start - first_element), values);
#pragma unroll
      for (int lane = 0; lane < kGroup; ++lane) {
        values[lane] = pointwise_detail::dropout_keeps(bits.word[lane], params.probability)
                           ? values[lane] * params.keep_scale
                           : 0.0f;
      }
      store_bf16<kGroup>(out + (group_start - first_element), values);
    } else {
      const std::int64_t sample_end = (sample + 1) * sample_numel;
      std::int64_t hi = group_start + kGroup < sample_end ? group_start + kGroup : sample_end;
      hi = hi < end_element ? hi : end_element;
      for (std::int64_t e = group_start > first_element ? group_start : first_element; e < hi; ++e) {
        float value[1];
        load_bf16<1>(in + (e - first_element), value);
        value[0] = pointwise_detail::dropout_keeps(bits.word[e - group_start], params.probability)
                       ? value[0] * params.keep_scale
                       : 0.0f;
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

int gelu_backward(const std::uint16_t* d_out, const std::uint16_t* x, std::uint16_t* d_x, std::int64_t n,
                  bool tanh_form, const CudaLaunch& launch) {
  if (n <= 0) return cudaSuccess;
  auto* kernel = tanh_form
                     ? (launch.vectorized ? gelu_backward_kernel<true, true> : gelu_backward_kernel<false, true>)
                     : (launch.vectorized ? gelu_backward_kernel<true, false> : gelu_backward_kernel<false, false>);
  kernel<<<elementwise_grid(n, launch), kThreads, 0, stream_of(launch)>>>(d_out, x, d_x, n);
  return cudaGetLastError();
}

int residual_add(const std::uint16_t* a, const std::uint16_t* b, std::uint16_t* out, std::int64_t n,
                 const CudaLaunch& launch) {
  if (n <= 0) return cudaSuccess;
  auto* kernel = launch.vectorized ? residual_add_kernel<true> : residual_add_kernel<false>;
  kernel<<<elementwise_grid(n, launch), kThreads, 0, stream_of(launch)>>>(a, b, out, n);
  return cudaGetLastError();
}

int dropout(const std::uint16_t* in, std::uint16_t* out, std::int64_t numel, std::int64_t sample_numel,
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
  const int grid =
      pointwise_detail::capped_grid(group_count, kThreads, launch.multiprocessors, kBlocksPerMultiprocessor);
  auto* kernel = launch.vectorized ? dropout_kernel<true> : dropout_kernel<false>;
  kernel<<<grid, kThreads, 0, stream_of(launch)>>>(in, out, numel, sample_numel, group_begin, group_count, params);
  return cudaGetLastError();
}

}  // namespace adamant::kernels::cuda
