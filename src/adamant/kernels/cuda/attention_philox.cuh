#pragma once
// Device-side Philox4x32-10 and the attention dropout mask, bit-identical to
// core/rng.h and kernels/dropout.h (which do not compile under nvcc), so that GPU
// and CPU drop the same elements. Only for *.cu files.
#include <cuda_runtime.h>

#include <cstdint>

#include "adamant/kernels/cuda/attention_launchers.h"

namespace adamant::kernels::cuda::attention_detail {

// The ten-round Philox4x32 bijection of `counter` under `key` (core/rng.h philox4x32).
__device__ __forceinline__ uint4 philox4x32_10(uint4 counter, uint2 key) {
  constexpr std::uint32_t kMultiplier0 = 0xD2511F53u;
  constexpr std::uint32_t kMultiplier1 = 0xCD9E8D57u;
  constexpr std::uint32_t kWeyl0 = 0x9E3779B9u;
  constexpr std::uint32_t kWeyl1 = 0xBB67AE85u;
#pragma unroll
  for (int round = 0; round < 10; ++round) {
    const std::uint32_t hi0 = __umulhi(kMultiplier0, counter.x);
    const std::uint32_t lo0 = kMultiplier0 * counter.x;
    const std::uint32_t hi1 = __umulhi(kMultiplier1, counter.z);
    const std::uint32_t lo1 = kMultiplier1 * counter.z;
    counter = make_uint4(hi1 ^ counter.y ^ key.x, lo1, hi0 ^ counter.w ^ key.y, lo0);
    key.x += kWeyl0;
    key.y += kWeyl1;
  }
  return counter;
}

// core/rng.h philox_draw: counter (index, stream), key seed, each split low word first.
__device__ __forceinline__ uint4 philox_draw(std::uint64_t seed, std::uint64_t index, std::uint64_t stream) {
  const uint4 counter = make_uint4(static_cast<std::uint32_t>(index), static_cast<std::uint32_t>(index >> 32),
                                   static_cast<std::uint32_t>(stream), static_cast<std::uint32_t>(stream >> 32));
  return philox4x32_10(counter, make_uint2(static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)));
}

__device__ __forceinline__ std::uint32_t philox_word(const uint4& words, unsigned which) {
  switch (which) {
    case 0:
      return words.x;
    case 1:
      return words.y;
    case 2:
      return words.z;
    default:
      return words.w;
  }
}

// Dropout factors (0 or 1/(1-p)) of one sample's attention elements; one Philox
// draw covers four consecutive elements and is reused while they are visited in order.
class DropoutMask {
 public:
  __device__ DropoutMask(const attention_launchers::Dropout& dropout, int sample)
      : seed_(dropout.seed),
        stream_(dropout.stream_base + static_cast<std::uint64_t>(sample) * dropout.stream_per_sample),
        probability_(dropout.probability),
        keep_scale_(dropout.keep_scale) {}

  __device__ float factor(std::uint64_t element) {
    const std::uint64_t group = element >> 2;
    if (group != cached_group_) {
      words_ = philox_draw(seed_, group, stream_);
      cached_group_ = group;
    }
    // kernels/dropout.h dropout_keeps with core/rng.h uniform_float: 24 bits in [0, 1).
    const float uniform = static_cast<float>(philox_word(words_, static_cast<unsigned>(element & 3u)) >> 8) * 0x1p-24f;
    return uniform >= probability_ ? keep_scale_ : 0.0f;
  }

 private:
  std::uint64_t seed_;
  std::uint64_t stream_;
  float probability_;
  float keep_scale_;
  std::uint64_t cached_group_ = ~std::uint64_t{0};
  uint4 words_ = make_uint4(0, 0, 0, 0);
};

}  // namespace adamant::kernels::cuda::attention_detail
