#pragma once
// Philox4x32-10 and the dropout keep decision, bit-identical to core/rng.h and
// kernels/dropout.h (which cannot be included by nvcc: dropout.h pulls in fmt).
// The functions are host-and-device so that a host test can check them against
// core/rng.h word for word; the 64-bit products compile to mul.wide.u32 on the GPU.
#include <cstdint>

#if defined(__CUDACC__)
#define ADAMANT_PHILOX_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define ADAMANT_PHILOX_HOST_DEVICE inline
#endif

namespace adamant::kernels::cuda::pointwise_detail {

struct PhiloxWords {
  std::uint32_t word[4];
};

// The ten-round bijection of `counter` under the key (key_low, key_high).
ADAMANT_PHILOX_HOST_DEVICE PhiloxWords philox4x32_10(PhiloxWords counter, std::uint32_t key_low,
                                                     std::uint32_t key_high) {
  constexpr std::uint64_t kMultiplier0 = 0xD2511F53u;
  constexpr std::uint64_t kMultiplier1 = 0xCD9E8D57u;
  constexpr std::uint32_t kWeyl0 = 0x9E3779B9u;
  constexpr std::uint32_t kWeyl1 = 0xBB67AE85u;
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
  for (int round = 0; round < 10; ++round) {
    const std::uint64_t product0 = kMultiplier0 * counter.word[0];
    const std::uint64_t product1 = kMultiplier1 * counter.word[2];
    const auto hi0 = static_cast<std::uint32_t>(product0 >> 32);
    const auto lo0 = static_cast<std::uint32_t>(product0);
    const auto hi1 = static_cast<std::uint32_t>(product1 >> 32);
    const auto lo1 = static_cast<std::uint32_t>(product1);
    counter = PhiloxWords{{hi1 ^ counter.word[1] ^ key_low, lo1, hi0 ^ counter.word[3] ^ key_high, lo0}};
    key_low += kWeyl0;
    key_high += kWeyl1;
  }
  return counter;
}

// core/rng.h philox_draw: counter (index, stream) as little-endian word pairs, key = seed.
ADAMANT_PHILOX_HOST_DEVICE PhiloxWords philox_draw(std::uint64_t seed, std::uint64_t index, std::uint64_t stream) {
  const PhiloxWords counter{{static_cast<std::uint32_t>(index), static_cast<std::uint32_t>(index >> 32),
                             static_cast<std::uint32_t>(stream), static_cast<std::uint32_t>(stream >> 32)}};
  return philox4x32_10(counter, static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32));
}

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
