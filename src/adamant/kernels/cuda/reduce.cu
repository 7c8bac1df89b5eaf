// Deterministic squared L2 norm over the segments of a flat shard (kernels/reduce.h).
//
// Two passes in a fixed order, so the result is bit-identical from run to run:
// pass 1 runs a grid whose size depends only on the element count and type; block b
// sums the tiles b, b + grid, ... (each thread adds the squares of its kUnroll 16-byte
// groups per tile into a double) and reduces its threads in a fixed tree into
// partial[b]; pass 2, one block, adds the partials in a fixed tree and writes the
// result. No atomics.
#include <cstdint>

#include "adamant/kernels/cuda/device_common.cuh"
#include "adamant/kernels/cuda/launchers.h"

namespace adamant::kernels::cuda::launchers {

namespace {

constexpr int kThreads = 256;
// 16-byte groups per thread per tile: 4 fp32 or 8 bf16 elements a group, so that a thread
// keeps as many bytes in flight whatever the element size. (bf16 in 8-byte groups of 4 kept
// half as many and read at 1.6 TB/s on an H200 where fp32 read at 4.2; 8 such groups a
// thread ran slower still, 2.6 against 1.7 ms for 1.3e9 elements.)
constexpr int kUnroll = 4;
constexpr int kGroupBytes = 16;

template <DType kInput>
constexpr int kGroupLanes = kGroupBytes / static_cast<int>(sizeof(detail::Storage<kInput>));
template <DType kInput>
constexpr std::int64_t kTile = static_cast<std::int64_t>(kThreads) * kUnroll* kGroupLanes<kInput>;

// Element `lane` of a 16-byte group held as four words, as fp32.
template <DType kInput>
__device__ __forceinline__ float group_element(const uint4& group, int lane) {
  const std::uint32_t word = (&group.x)[kInput == DType::f32 ? lane : lane / 2];
  if constexpr (kInput == DType::f32) {
    return __uint_as_float(word);
  } else {
    static_assert(kInput == DType::bf16);
    return __uint_as_float(lane % 2 == 0 ? word << 16 : word & 0xffff0000u);
  }
}

// Loads the lanes of the group starting at element `first` that lie in [begin, end): one
// 16-byte access when the whole group is inside and the array aligned, else one scalar
// access per lane. Lanes outside stay zero.
template <DType kInput, bool kVectorized>
__device__ __forceinline__ uint4 load_group_words(const detail::Storage<kInput>* x, std::int64_t first,
                                                  std::int64_t begin, std::int64_t end) {
  constexpr int kLanes = kGroupLanes<kInput>;
  if (kVectorized && first >= begin && first + kLanes <= end) {
    return __ldcs(reinterpret_cast<const uint4*>(x + first));
  }
  uint4 group = make_uint4(0, 0, 0, 0);
#pragma unroll
  for (int lane = 0; lane < kLanes; ++lane) {
    const std::int64_t i = first + lane;
    if (i < begin || i >= end) continue;
    if constexpr (kInput == DType::f32) {
      (&group.x)[lane] = __float_as_uint(x[i]);
    } else {
      (&group.x)[lane / 2] |= static_cast<std::uint32_t>(x[i]) << (16 * (lane % 2));
    }
  }
  return group;
}

// Sums a block's per-thread values in a fixed order; the result is valid in thread 0.
__device__ double block_sum(double value) {
  __shared__ double warp_sums[kThreads / 32];
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) value += __shfl_down_sync(0xffffffffu, value, offset);
  const int warp = static_cast<int>(threadIdx.x) / 32;
  if (threadIdx.x % 32 == 0) warp_sums[warp] = value;
  __syncthreads();
  double total = 0.0;
  if (threadIdx.x == 0) {
    for (int w = 0; w < kThreads / 32; ++w) total += warp_sums[w];
  }
  return total;
}

// 4 blocks per multiprocessor must fit, so that all kMaxSquaredNormPartials run at once.
template <DType kInput, bool kVectorized>
__global__ void __launch_bounds__(kThreads, 4)
    squared_norm_partials_kernel(const void* input, std::int64_t numel, const std::int64_t* segments, int num_segments,
                                 double* partials) {
  constexpr int kLanes = kGroupLanes<kInput>;
  constexpr std::int64_t kTileElements = kTile<kInput>;
  const auto* x = static_cast<const detail::Storage<kInput>*>(input);
  const std::int64_t num_tiles = (numel + kTileElements - 1) / kTileElements;
  double thread_sum = 0.0;
  int first_segment = 0;
  for (std::int64_t tile = blockIdx.x; tile < num_tiles; tile += gridDim.x) {
    const std::int64_t tile_begin = tile * kTileElements;
    const std::int64_t tile_end = tile_begin + kTileElements < numel ? tile_begin + kTileElements : numel;
    first_segment = detail::next_segment_ending_after(segments, num_segments, first_segment, tile_begin);
    for (int s = first_segment; s < num_segments; ++s) {
      const std::int64_t segment_begin = __ldg(segments + 3 * s);
      if (segment_begin >= tile_end) break;
      const std::int64_t begin = max(segment_begin, tile_begin);
      const std::int64_t end = min(__ldg(segments + 3 * s + 1), tile_end);
      uint4 groups[kUnroll];
#pragma unroll
      for (int k = 0; k < kUnroll; ++k) {
        const std::int64_t first =
            tile_begin + static_cast<std::int64_t>(k * kThreads + static_cast<int>(threadIdx.x)) * kLanes;
        groups[k] = first < end && first + kLanes > begin ? load_group_words<kInput, kVectorized>(x, first, begin, end)
                                                          : make_uint4(0, 0, 0, 0);
      }
      // Lanes outside the range are zero. Squares of fp32 values are exact in fp64 and are summed
      // there, so that a sum split at other places (buckets, shards) differs only in fp64 rounding.
#pragma unroll
      for (int k = 0; k < kUnroll; ++k) {
#pragma unroll
        for (int lane = 0; lane < kLanes; ++lane) {
          const double value = static_cast<double>(group_element<kInput>(groups[k], lane));
          thread_sum = __fma_rn(value, value, thread_sum);
        }
      }
    }
  }
  const double total = block_sum(thread_sum);
  if (threadIdx.x == 0) partials[blockIdx.x] = total;
}

__global__ void __launch_bounds__(kThreads)
    squared_norm_finish_kernel(const double* partials, int num_partials, double* out, bool accumulate) {
  double thread_sum = 0.0;
  for (int i = static_cast<int>(threadIdx.x); i < num_partials; i += kThreads) thread_sum += partials[i];
  const double total = block_sum(thread_sum);
  if (threadIdx.x == 0) {
    *out = accumulate ? *out + total : total;
  }
}

template <DType kInput>
cudaError_t launch_partials(const void* x, std::int64_t numel, const std::int64_t* segments, int num_segments,
                            double* partials, int grid, bool vectorized, cudaStream_t stream) {
  auto* kernel = vectorized ? squared_norm_partials_kernel<kInput, true> : squared_norm_partials_kernel<kInput, false>;
  kernel<<<grid, kThreads, 0, stream>>>(x, numel, segments, num_segments, partials);
  return cudaGetLastError();
}

}  // namespace

int squared_norm_partials(std::int64_t numel, DType x_dtype) {
  const std::int64_t tile = x_dtype == DType::f32 ? kTile<DType::f32> : kTile<DType::bf16>;
  const std::int64_t num_tiles = (numel + tile - 1) / tile;
  if (num_tiles < 1) return 1;
  return static_cast<int>(num_tiles < kMaxSquaredNormPartials ? num_tiles : kMaxSquaredNormPartials);
}

cudaError_t squared_norm(const void* x, DType x_dtype, std::int64_t numel, const std::int64_t* segments,
                         int num_segments, double* partials, double* out, bool accumulate, LaunchShape shape,
                         cudaStream_t stream) {
  const int grid = squared_norm_partials(numel, x_dtype);
  cudaError_t status = cudaErrorInvalidValue;
  if (x_dtype == DType::f32) {
    status = launch_partials<DType::f32>(x, numel, segments, num_segments, partials, grid, shape.vectorized, stream);
  } else if (x_dtype == DType::bf16) {
    status = launch_partials<DType::bf16>(x, numel, segments, num_segments, partials, grid, shape.vectorized, stream);
  }
  if (status != cudaSuccess) return status;
  squared_norm_finish_kernel<<<1, kThreads, 0, stream>>>(partials, grid, out, accumulate);
  return cudaGetLastError();
}

}  // namespace adamant::kernels::cuda::launchers
