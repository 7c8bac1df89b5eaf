// Element-wise kernels on flat views (kernels/elementwise.h): casts, scaling and
// accumulation. Each thread handles groups of 4 elements in a grid-stride loop,
// with vector accesses when every operand is aligned for them.
#include <cstdint>

#include "adamant/kernels/cuda/device_common.cuh"
#include "adamant/kernels/cuda/launchers.h"

namespace adamant::kernels::cuda::launchers {

namespace {

using detail::kLanes;

constexpr int kThreads = 256;
// Enough groups per thread that a grid of this many blocks per SM covers the GPU.
constexpr int kBlocksPerMultiprocessor = 8;

// Calls body(first) for each group of 4 elements [first, first + 4) of [0, numel).
template <typename Body>
__device__ __forceinline__ void for_each_group(std::int64_t numel, Body body) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x * kLanes;
  for (std::int64_t first = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * kLanes; first < numel;
       first += stride) {
    body(first);
  }
}

template <DType kSrc, DType kDst, bool kVectorized>
__global__ void __launch_bounds__(kThreads) cast_kernel(const void* src, void* dst, std::int64_t numel) {
  const auto* in = static_cast<const detail::Storage<kSrc>*>(src);
  auto* out = static_cast<detail::Storage<kDst>*>(dst);
  for_each_group(numel, [&](std::int64_t first) {
    detail::Storage<kSrc> values[kLanes] = {};
    detail::load_group<kVectorized>(in, first, 0, numel, values);
    detail::Storage<kDst> converted[kLanes];
#pragma unroll
    for (int lane = 0; lane < kLanes; ++lane)
      converted[lane] = detail::from_f32<kDst>(detail::to_f32<kSrc>(values[lane]));
    detail::store_group<kVectorized>(out, first, 0, numel, converted);
  });
}

template <DType kType, bool kVectorized>
__global__ void __launch_bounds__(kThreads) scale_kernel(void* data, float factor, std::int64_t numel) {
  auto* x = static_cast<detail::Storage<kType>*>(data);
  for_each_group(numel, [&](std::int64_t first) {
    detail::Storage<kType> values[kLanes] = {};
    detail::load_group<kVectorized>(x, first, 0, numel, values);
#pragma unroll
    for (int lane = 0; lane < kLanes; ++lane) {
      values[lane] = detail::from_f32<kType>(__fmul_rn(detail::to_f32<kType>(values[lane]), factor));
    }
    detail::store_group<kVectorized>(x, first, 0, numel, values);
  });
}

template <DType kSrc, DType kDst, bool kVectorized>
__global__ void __launch_bounds__(kThreads) accumulate_kernel(const void* src, void* dst, std::int64_t numel) {
  const auto* in = static_cast<const detail::Storage<kSrc>*>(src);
  auto* out = static_cast<detail::Storage<kDst>*>(dst);
  for_each_group(numel, [&](std::int64_t first) {
    detail::Storage<kSrc> values[kLanes] = {};
    detail::Storage<kDst> sums[kLanes] = {};
    detail::load_group<kVectorized>(in, first, 0, numel, values);
    detail::load_group<kVectorized>(out, first, 0, numel, sums);
#pragma unroll
    for (int lane = 0; lane < kLanes; ++lane) {
      sums[lane] =
          detail::from_f32<kDst>(__fadd_rn(detail::to_f32<kDst>(sums[lane]), detail::to_f32<kSrc>(values[lane])));
    }
    detail::store_group<kVectorized>(out, first, 0, numel, sums);
  });
}

int grid_for(std::int64_t numel, int multiprocessors) {
  const std::int64_t groups = (numel + kLanes - 1) / kLanes;
  const std::int64_t needed = (groups + kThreads - 1) / kThreads;
  const std::int64_t resident = static_cast<std::int64_t>(multiprocessors) * kBlocksPerMultiprocessor;
  return static_cast<int>(needed < resident ? needed : resident);
}

template <typename Kernel, typename... Args>
cudaError_t launch(Kernel aligned_kernel, Kernel unaligned_kernel, std::int64_t numel, LaunchShape shape,
                   cudaStream_t stream, Args... args) {
  if (numel == 0) return cudaSuccess;
  (shape.vectorized
       ? aligned_kernel
       : unaligned_kernel)<<<grid_for(numel, shape.multiprocessors), kThreads, 0, stream>>>(args..., numel);
  return cudaGetLastError();
}

template <DType kSrc, DType kDst>
cudaError_t launch_cast(const void* src, void* dst, std::int64_t numel, LaunchShape shape, cudaStream_t stream) {
  return launch(cast_kernel<kSrc, kDst, true>, cast_kernel<kSrc, kDst, false>, numel, shape, stream, src, dst);
}

template <DType kSrc>
cudaError_t launch_cast_from(const void* src, void* dst, DType dst_dtype, std::int64_t numel, LaunchShape shape,
                             cudaStream_t stream) {
  switch (dst_dtype) {
    case DType::f32:
      return launch_cast<kSrc, DType::f32>(src, dst, numel, shape, stream);
    case DType::bf16:
      return launch_cast<kSrc, DType::bf16>(src, dst, numel, shape, stream);
    case DType::f16:
      return launch_cast<kSrc, DType::f16>(src, dst, numel, shape, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace

cudaError_t cast(const void* src, DType src_dtype, void* dst, DType dst_dtype, std::int64_t numel, LaunchShape shape,
                 cudaStream_t stream) {
  if (numel == 0) return cudaSuccess;
  if (src_dtype == dst_dtype) {
    return cudaMemcpyAsync(dst, src, static_cast<std::size_t>(numel) * dtype_size(src_dtype), cudaMemcpyDeviceToDevice,
                           stream);
  }
  switch (src_dtype) {
    case DType::f32:
      return launch_cast_from<DType::f32>(src, dst, dst_dtype, numel, shape, stream);
    case DType::bf16:
      return launch_cast_from<DType::bf16>(src, dst, dst_dtype, numel, shape, stream);
    case DType::f16:
      return launch_cast_from<DType::f16>(src, dst, dst_dtype, numel, shape, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

cudaError_t scale(void* x, DType dtype, float factor, std::int64_t numel, LaunchShape shape, cudaStream_t stream) {
  switch (dtype) {
    case DType::f32:
      return launch(scale_kernel<DType::f32, true>, scale_kernel<DType::f32, false>, numel, shape, stream, x, factor);
    case DType::bf16:
      return launch(scale_kernel<DType::bf16, true>, scale_kernel<DType::bf16, false>, numel, shape, stream, x, factor);
    case DType::f16:
      return launch(scale_kernel<DType::f16, true>, scale_kernel<DType::f16, false>, numel, shape, stream, x, factor);
    default:
      return cudaErrorInvalidValue;
  }
}

cudaError_t accumulate(const void* src, DType src_dtype, void* dst, DType dst_dtype, std::int64_t numel,
                       LaunchShape shape, cudaStream_t stream) {
  if (src_dtype == DType::f32 && dst_dtype == DType::f32) {
    return launch(accumulate_kernel<DType::f32, DType::f32, true>, accumulate_kernel<DType::f32, DType::f32, false>,
                  numel, shape, stream, src, dst);
  }
  if (src_dtype == DType::bf16 && dst_dtype == DType::f32) {
    return launch(accumulate_kernel<DType::bf16, DType::f32, true>, accumulate_kernel<DType::bf16, DType::f32, false>,
                  numel, shape, stream, src, dst);
  }
  if (src_dtype == DType::f32 && dst_dtype == DType::bf16) {
    return launch(accumulate_kernel<DType::f32, DType::bf16, true>, accumulate_kernel<DType::f32, DType::bf16, false>,
                  numel, shape, stream, src, dst);
  }
  return cudaErrorInvalidValue;
}

}  // namespace adamant::kernels::cuda::launchers
