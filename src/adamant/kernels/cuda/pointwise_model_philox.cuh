#pragma once
// The hidden dropout's keep decision, bit-identical to kernels/dropout.h (which cannot
// be included by nvcc: dropout.h pulls in fmt), on the Philox of philox.cuh.
#include <cstdint>

#include "adamant/kernels/cuda/philox.cuh"
#include "adamant/kernels/cuda_launch.h"

namespace adamant::kernels::cuda::pointwise_detail {

// kernels/dropout.h: the stream of one (global sample, site) and the four decisions
// of elements [4 * group, 4 * group + 4) of that sample.
constexpr int kDropoutSiteBits = 24;
ADAMANT_PHILOX_HOST_DEVICE PhiloxWords dropout_bits(std::uint64_t seed, std::uint64_t global_sample, std::uint32_t site,
                                                    std::uint64_t group) {
  return philox_draw(seed, group, (global_sample << kDropoutSiteBits) | site);
}

// core/rng.h uniform_float (24 random bits, exact in fp32) compared as dropout_keeps does.
ADAMANT_PHILOX_HOST_DEVICE bool dropout_keeps(std::uint32_t bits, float probability) {
  return static_cast<float>(bits >> 8) * 0x1p-24f >= probability;
}

// An element after dropout, by its Philox word: kept and scaled, or zeroed. Scalars, not
// DropoutParams: a reference to the kernel's parameter costs the dropout kernels registers.
ADAMANT_PHILOX_HOST_DEVICE float dropout_value(float value, std::uint32_t bits, float probability, float keep_scale) {
  return dropout_keeps(bits, probability) ? value * keep_scale : 0.0f;
}

#ifdef __CUDACC__
// The batch's first sample: the launch's index plus, when given, the one in device memory
// (a recorded step reads each micro-batch's index there).
__device__ __forceinline__ std::uint64_t first_sample_of(const DropoutParams& params) {
  return params.first_sample_index + (params.sample_offset != nullptr ? *params.sample_offset : 0);
}
#endif

}  // namespace adamant::kernels::cuda::pointwise_detail
