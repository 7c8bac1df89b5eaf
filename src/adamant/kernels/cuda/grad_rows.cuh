#pragma once
// Gradient-buffer elements read and written as fp32 values, kWidth at a time: the buffer is
// fp32, or bf16 (GptConfig::grad_buffer), whose values are rounded once per store.
#include <cstdint>

#include "adamant/kernels/cuda/pointwise_model_device.cuh"

namespace adamant::kernels::cuda::grad_rows {

template <int kWidth>
__device__ __forceinline__ void load(const float* p, float (&out)[kWidth]) {
  pointwise_detail::load_f32<kWidth>(p, out);
}
template <int kWidth>
__device__ __forceinline__ void load(const std::uint16_t* p, float (&out)[kWidth]) {
  pointwise_detail::load_bf16<kWidth>(p, out);
}
template <int kWidth>
__device__ __forceinline__ void store(float* p, const float (&in)[kWidth]) {
  pointwise_detail::store_f32<kWidth>(p, in);
}
template <int kWidth>
__device__ __forceinline__ void store(std::uint16_t* p, const float (&in)[kWidth]) {
  pointwise_detail::store_bf16<kWidth>(p, in);
}

}  // namespace adamant::kernels::cuda::grad_rows
