#pragma once
// The order decode_top_k sorts logits by: unsigned keys that order like the floats, -0 as +0
// (so +0 and -0 tie and the lower id wins). Compiled for the host and (under nvcc) the device
// alike, so the CPU reference and the GPU selection share one definition.
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define ADAMANT_DECODE_ORDER_FN __host__ __device__ __forceinline__
#else
#define ADAMANT_DECODE_ORDER_FN inline
#endif

namespace adamant::kernels {

ADAMANT_DECODE_ORDER_FN std::uint32_t decode_order_key(float value) {
  std::uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof(bits));  // a bit copy on both compilers (__float_as_uint's bits)
  if (bits == 0x80000000u) bits = 0;
  return (bits & 0x80000000u) != 0 ? ~bits : bits | 0x80000000u;
}

}  // namespace adamant::kernels
