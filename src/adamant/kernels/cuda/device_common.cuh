#pragma once
// Device-side helpers shared by the optimizer CUDA kernels: element storage and
// conversions that match core/half.h bit for bit, 4-lane vector loads and stores,
// and grid sizing. Only for *.cu files.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "adamant/core/dtype.h"

namespace adamant::kernels::cuda::detail {

// Every kernel works on groups of 4 consecutive elements: one 16-byte access for
// fp32 arrays, one 8-byte access for 16-bit arrays.
constexpr int kLanes = 4;

template <DType T>
struct StorageOf;
template <>
struct StorageOf<DType::f32> {
  using type = float;
  using vector = float4;
};
template <>
struct StorageOf<DType::bf16> {
  using type = std::uint16_t;
  using vector = ushort4;
};
template <>
struct StorageOf<DType::f16> {
  using type = std::uint16_t;
  using vector = ushort4;
};
template <>
struct StorageOf<DType::u16> {
  using type = std::uint16_t;
  using vector = ushort4;
};
template <DType T>
using Storage = typename StorageOf<T>::type;

// bf16 <-> fp32 with the exact integer recipes of core/half.h (round to nearest
// even, quiet NaN kept), so CPU and GPU write identical bits.
__device__ __forceinline__ float bf16_bits_to_f32(std::uint16_t h) {
  return __uint_as_float(static_cast<std::uint32_t>(h) << 16);
}
__device__ __forceinline__ std::uint16_t f32_to_bf16_bits(float f) {
  std::uint32_t u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}
// Two fp32 as bf16 in one register, `low` in the low half, by the hardware's conversion:
// one instruction for both, rounding to nearest even exactly as f32_to_bf16_bits, except
// that a NaN becomes the canonical NaN instead of keeping its payload. For activations,
// where only NaN-ness matters.
__device__ __forceinline__ std::uint32_t pack_bf16(float low, float high) {
  std::uint32_t packed;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(packed) : "f"(high), "f"(low));
  return packed;
}
// 2^x on the special function unit (relative error about 2^-22); 2^-inf = 0.
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}
// 1 / x on the special function unit (within about an ulp); 1 / inf = 0.
__device__ __forceinline__ float fast_reciprocal(float x) {
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}
// store_param_remainders rounding: half away from zero on the bit pattern.
__device__ __forceinline__ std::uint16_t bf16_bits_for_remainder(float f) {
  return static_cast<std::uint16_t>((__float_as_uint(f) + 0x8000u) >> 16);
}
__device__ __forceinline__ float join_remainder_bits(std::uint16_t high, std::uint16_t remainder) {
  const auto low = static_cast<std::int32_t>(static_cast<std::int16_t>(remainder));
  return __uint_as_float((static_cast<std::uint32_t>(high) << 16) + static_cast<std::uint32_t>(low));
}
// The inverse: the bf16 weight (rounded as bf16_bits_for_remainder) and the remainder that rebuild f.
__device__ __forceinline__ void split_remainder_bits(float f, std::uint16_t& high, std::uint16_t& remainder) {
  high = bf16_bits_for_remainder(f);
  remainder = static_cast<std::uint16_t>(__float_as_uint(f) - (static_cast<std::uint32_t>(high) << 16));
}

template <DType T>
__device__ __forceinline__ float to_f32(Storage<T> x) {
  if constexpr (T == DType::f32) {
    return x;
  } else if constexpr (T == DType::bf16) {
    return bf16_bits_to_f32(x);
  } else {
    static_assert(T == DType::f16);
    return __half2float(__ushort_as_half(x));
  }
}
// To bf16/f16: round to nearest even.
template <DType T>
__device__ __forceinline__ Storage<T> from_f32(float x) {
  if constexpr (T == DType::f32) {
    return x;
  } else if constexpr (T == DType::bf16) {
    return f32_to_bf16_bits(x);
  } else {
    static_assert(T == DType::f16);
    return __half_as_ushort(__float2half_rn(x));
  }
}

// Streaming (evict-first) accesses: optimizer data is touched once per step and
// should not push reusable data out of L2.
__device__ __forceinline__ void load_vector(const float* p, float (&out)[kLanes]) {
  const float4 v = __ldcs(reinterpret_cast<const float4*>(p));
  out[0] = v.x;
  out[1] = v.y;
  out[2] = v.z;
  out[3] = v.w;
}
__device__ __forceinline__ void load_vector(const std::uint16_t* p, std::uint16_t (&out)[kLanes]) {
  const ushort4 v = __ldcs(reinterpret_cast<const ushort4*>(p));
  out[0] = v.x;
  out[1] = v.y;
  out[2] = v.z;
  out[3] = v.w;
}
__device__ __forceinline__ void store_vector(float* p, const float (&in)[kLanes]) {
  __stcs(reinterpret_cast<float4*>(p), make_float4(in[0], in[1], in[2], in[3]));
}
__device__ __forceinline__ void store_vector(std::uint16_t* p, const std::uint16_t (&in)[kLanes]) {
  __stcs(reinterpret_cast<ushort4*>(p), make_ushort4(in[0], in[1], in[2], in[3]));
}

// Loads the lanes of group [first, first + 4) that lie in [begin, end): one vector
// access when the whole group is inside and the arrays are aligned, else one scalar
// access per lane. Lanes outside are left as they were.
template <bool kVectorized, typename S>
__device__ __forceinline__ void load_group(const S* base, std::int64_t first, std::int64_t begin, std::int64_t end,
                                           S (&out)[kLanes]) {
  if (kVectorized && first >= begin && first + kLanes <= end) {
    load_vector(base + first, out);
    return;
  }
#pragma unroll
  for (int lane = 0; lane < kLanes; ++lane) {
    const std::int64_t i = first + lane;
    if (i >= begin && i < end) out[lane] = base[i];
  }
}
template <bool kVectorized, typename S>
__device__ __forceinline__ void store_group(S* base, std::int64_t first, std::int64_t begin, std::int64_t end,
                                            const S (&in)[kLanes]) {
  if (kVectorized && first >= begin && first + kLanes <= end) {
    store_vector(base + first, in);
    return;
  }
#pragma unroll
  for (int lane = 0; lane < kLanes; ++lane) {
    const std::int64_t i = first + lane;
    if (i >= begin && i < end) base[i] = in[lane];
  }
}

// Index of the first segment at or after `from` whose end lies after `position`
// (segments sorted and non-overlapping, so ends are increasing); num_segments if
// none. A block visits its tiles in increasing order, so it passes the previous
// answer as `from`: inside a large segment that costs one cached load per tile,
// and a binary search over the rest otherwise.
__device__ __forceinline__ int next_segment_ending_after(const std::int64_t* segments, int num_segments, int from,
                                                         std::int64_t position) {
  if (from >= num_segments || __ldg(segments + 3 * from + 1) > position) return from;
  int low = from + 1;
  int high = num_segments;
  while (low < high) {
    const int mid = low + (high - low) / 2;
    if (__ldg(segments + 3 * mid + 1) > position) {
      high = mid;
    } else {
      low = mid + 1;
    }
  }
  return low;
}

// ---- host side ----

// A persistent grid for `kernel`: as many blocks as fit on the GPU at once, but
// no more than there are tiles of work (and at least one).
template <typename Kernel>
int resident_grid_size(Kernel kernel, int block_threads, int multiprocessors, std::int64_t num_tiles) {
  int blocks_per_multiprocessor = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks_per_multiprocessor, kernel, block_threads, 0) !=
          cudaSuccess ||
      blocks_per_multiprocessor < 1) {
    blocks_per_multiprocessor = 1;
  }
  const std::int64_t resident = static_cast<std::int64_t>(blocks_per_multiprocessor) * multiprocessors;
  const std::int64_t grid = num_tiles < resident ? num_tiles : resident;
  return static_cast<int>(grid > 0 ? grid : 1);
}

}  // namespace adamant::kernels::cuda::detail
