#pragma once
// Device helpers of the layernorm, element-wise and embedding kernels: bf16 and
// fp32 accesses of kWidth consecutive elements (8 bf16 = one 16-byte access, 1 =
// scalar) converted to fp32, a warp sum, and grid sizing. Only for *.cu files.
#include <cuda_runtime.h>

#include <cstdint>

#include "adamant/kernels/cuda/device_common.cuh"

namespace adamant::kernels::cuda::pointwise_detail {

constexpr int kWarp = 32;
// bf16 elements per 16-byte vector access.
constexpr int kVectorWidth = 8;

// The 8 values of 8 bf16 packed in four words, the element with the lower address in each low half.
__device__ __forceinline__ void unpack_bf16(const uint4& packed, float (&out)[kVectorWidth]) {
  const std::uint32_t words[4] = {packed.x, packed.y, packed.z, packed.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    out[2 * i] = __uint_as_float(words[i] << 16);
    out[2 * i + 1] = __uint_as_float(words[i] & 0xffff0000u);
  }
}

// 8 values rounded to bf16 by the hardware conversion (detail::pack_bf16: the same bits as
// core/half.h for every number, the canonical NaN for a NaN) and packed as unpack_bf16 reads them.
__device__ __forceinline__ uint4 pack_bf16_vector(const float (&values)[kVectorWidth]) {
  return make_uint4(detail::pack_bf16(values[0], values[1]), detail::pack_bf16(values[2], values[3]),
                    detail::pack_bf16(values[4], values[5]), detail::pack_bf16(values[6], values[7]));
}

// Plain (coherent) loads: inputs may alias outputs of the same kernel.
template <int kWidth>
__device__ __forceinline__ void load_bf16(const std::uint16_t* p, float (&out)[kWidth]) {
  if constexpr (kWidth == 8) {
    unpack_bf16(*reinterpret_cast<const uint4*>(p), out);
  } else if constexpr (kWidth == 4) {
    const uint2 v = *reinterpret_cast<const uint2*>(p);
    out[0] = __uint_as_float(v.x << 16);
    out[1] = __uint_as_float(v.x & 0xffff0000u);
    out[2] = __uint_as_float(v.y << 16);
    out[3] = __uint_as_float(v.y & 0xffff0000u);
  } else {
    static_assert(kWidth == 1);
    out[0] = detail::bf16_bits_to_f32(*p);
  }
}

// Rounds by the hardware conversion, as pack_bf16_vector.
template <int kWidth>
__device__ __forceinline__ void store_bf16(std::uint16_t* p, const float (&in)[kWidth]) {
  if constexpr (kWidth == 8 || kWidth == 4) {
    std::uint32_t words[kWidth / 2];
#pragma unroll
    for (int i = 0; i < kWidth / 2; ++i) words[i] = detail::pack_bf16(in[2 * i], in[2 * i + 1]);
    if constexpr (kWidth == 8) {
      *reinterpret_cast<uint4*>(p) = make_uint4(words[0], words[1], words[2], words[3]);
    } else {
      *reinterpret_cast<uint2*>(p) = make_uint2(words[0], words[1]);
    }
  } else {
    static_assert(kWidth == 1);
    *p = static_cast<std::uint16_t>(detail::pack_bf16(in[0], 0.0f));
  }
}

// Stores 8 values as bf16 (one 16-byte access, rounded as store_bf16) and returns the stored words.
__device__ __forceinline__ uint4 store_packed_bf16(std::uint16_t* p, const float (&values)[kVectorWidth]) {
  const uint4 words = pack_bf16_vector(values);
  *reinterpret_cast<uint4*>(p) = words;
  return words;
}

template <int kWidth>
__device__ __forceinline__ void load_f32(const float* p, float (&out)[kWidth]) {
  if constexpr (kWidth == 8) {
    const float4 a = *reinterpret_cast<const float4*>(p);
    const float4 b = *reinterpret_cast<const float4*>(p + 4);
    out[0] = a.x;
    out[1] = a.y;
    out[2] = a.z;
    out[3] = a.w;
    out[4] = b.x;
    out[5] = b.y;
    out[6] = b.z;
    out[7] = b.w;
  } else {
#pragma unroll
    for (int i = 0; i < kWidth; ++i) out[i] = p[i];
  }
}

template <int kWidth>
__device__ __forceinline__ void store_f32(float* p, const float (&in)[kWidth]) {
  if constexpr (kWidth == 8) {
    *reinterpret_cast<float4*>(p) = make_float4(in[0], in[1], in[2], in[3]);
    *reinterpret_cast<float4*>(p + 4) = make_float4(in[4], in[5], in[6], in[7]);
  } else {
#pragma unroll
    for (int i = 0; i < kWidth; ++i) p[i] = in[i];
  }
}

// The sum over the warp, in the same butterfly order in every lane (all lanes get it).
__device__ __forceinline__ float warp_sum(float value) {
#pragma unroll
  for (int offset = kWarp / 2; offset > 0; offset /= 2) value += __shfl_xor_sync(0xffffffffu, value, offset);
  return value;
}

// Blocks for `work_items` items of `items_per_block`, capped at a few waves of
// resident blocks (the kernels loop grid-stride over the rest).
inline int capped_grid(std::int64_t work_items, std::int64_t items_per_block, int multiprocessors,
                       int blocks_per_multiprocessor) {
  const std::int64_t needed = (work_items + items_per_block - 1) / items_per_block;
  const std::int64_t cap =
      static_cast<std::int64_t>(multiprocessors > 0 ? multiprocessors : 1) * blocks_per_multiprocessor;
  const std::int64_t grid = needed < cap ? needed : cap;
  return static_cast<int>(grid > 0 ? grid : 1);
}

}  // namespace adamant::kernels::cuda::pointwise_detail
