#pragma once
// Philox4x32 (10 or 7 rounds), bit-identical to core/rng.h (which nvcc does not compile), for every
// CUDA kernel that draws random numbers: the hidden dropout (pointwise_model_philox.cuh)
// and the attention dropout (attention_philox.cuh). Host-and-device, so that a host
// test checks it against core/rng.h word for word (the device takes the same products
// in 32-bit halves).
#include <cstdint>

#if defined(__CUDACC__)
#define ADAMANT_PHILOX_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define ADAMANT_PHILOX_HOST_DEVICE inline
#endif

namespace adamant::kernels::cuda {

struct PhiloxWords {
  std::uint32_t word[4];
};

// The kRounds-round bijection of `counter` under the key (key_low, key_high).
template <int kRounds = 10>
ADAMANT_PHILOX_HOST_DEVICE PhiloxWords philox4x32(PhiloxWords counter, std::uint32_t key_low, std::uint32_t key_high) {
  static_assert(kRounds == 7 || kRounds == 10, "Philox4x32 is used with 7 or 10 rounds");
  constexpr std::uint64_t kMultiplier0 = 0xD2511F53u;
  constexpr std::uint64_t kMultiplier1 = 0xCD9E8D57u;
  constexpr std::uint32_t kWeyl0 = 0x9E3779B9u;
  constexpr std::uint32_t kWeyl1 = 0xBB67AE85u;
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
  for (int round = 0; round < kRounds; ++round) {
#if defined(__CUDA_ARCH__)
    // Separate high and low products: fewer live registers than 64-bit ones in the
    // attention kernels, which hold a draw next to their accumulators.
    const std::uint32_t hi0 = __umulhi(static_cast<std::uint32_t>(kMultiplier0), counter.word[0]);
    const std::uint32_t lo0 = static_cast<std::uint32_t>(kMultiplier0) * counter.word[0];
    const std::uint32_t hi1 = __umulhi(static_cast<std::uint32_t>(kMultiplier1), counter.word[2]);
    const std::uint32_t lo1 = static_cast<std::uint32_t>(kMultiplier1) * counter.word[2];
#else
    const std::uint64_t product0 = kMultiplier0 * counter.word[0];
    const std::uint64_t product1 = kMultiplier1 * counter.word[2];
    const auto hi0 = static_cast<std::uint32_t>(product0 >> 32);
    const auto lo0 = static_cast<std::uint32_t>(product0);
    const auto hi1 = static_cast<std::uint32_t>(product1 >> 32);
    const auto lo1 = static_cast<std::uint32_t>(product1);
#endif
    counter = PhiloxWords{{hi1 ^ counter.word[1] ^ key_low, lo1, hi0 ^ counter.word[3] ^ key_high, lo0}};
    key_low += kWeyl0;
    key_high += kWeyl1;
  }
  return counter;
}

// core/rng.h philox_draw: counter (index, stream) as little-endian word pairs, key = seed.
template <int kRounds = 10>
ADAMANT_PHILOX_HOST_DEVICE PhiloxWords philox_draw(std::uint64_t seed, std::uint64_t index, std::uint64_t stream) {
  const PhiloxWords counter{{static_cast<std::uint32_t>(index), static_cast<std::uint32_t>(index >> 32),
                             static_cast<std::uint32_t>(stream), static_cast<std::uint32_t>(stream >> 32)}};
  return philox4x32<kRounds>(counter, static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32));
}

}  // namespace adamant::kernels::cuda
