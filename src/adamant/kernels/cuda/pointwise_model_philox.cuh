#pragma once
// The hidden dropout's keep decision, bit-identical to kernels/dropout.h (which cannot
// be included by nvcc: dropout.h pulls in fmt), on the Philox of philox.cuh.
#include <cstdint>

#include "adamant/kernels/cuda/philox.cuh"

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

}  // namespace adamant::kernels::cuda::pointwise_detail
