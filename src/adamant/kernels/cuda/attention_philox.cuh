#pragma once
// Device-side Philox4x32-10 and the attention dropout mask, bit-identical to
// core/rng.h and kernels/dropout.h (which do not compile under nvcc), so that GPU
// and CPU drop the same elements. Only for *.cu files.
#include <cuda_runtime.h>

#include <cstdint>

#include "adamant/kernels/attention_dropout_layout.h"
#include "adamant/kernels/cuda/flash_attention_launchers.h"

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

// Dropout factors (0 or 1/(1-p)) of one sample's attention elements, in the draw
// layout of kernels/attention_dropout_layout.h: one draw decides four elements, rows
// {r, r + 8} x columns {c, c + 8} of a 16 x 16 block, which one thread of an m16n8
// accumulator tile holds in either orientation.
class DropoutMask {
 public:
  __device__ DropoutMask(const flash_attention_launchers::Dropout& dropout, int sample, int head, int seq)
      : seed_(dropout.seed),
        stream_(dropout.stream_base + static_cast<std::uint64_t>(sample) * dropout.stream_per_sample),
        head_(static_cast<std::uint64_t>(head)),
        blocks_(attention_dropout_layout::blocks_per_row(static_cast<std::uint64_t>(seq))),
        probability_(dropout.probability),
        keep_scale_(dropout.keep_scale) {}

  // The four words of block (query_block, key_block)'s draw for lanes q % 8 and k % 8.
  __device__ uint4 draw(int query_block, int key_block, int query_lane, int key_lane) const {
    return philox_draw(seed_,
                       attention_dropout_layout::draw_index(
                           head_, static_cast<std::uint64_t>(query_block), static_cast<std::uint64_t>(key_block),
                           static_cast<std::uint64_t>(query_lane), static_cast<std::uint64_t>(key_lane), blocks_),
                       stream_);
  }

  // kernels/dropout.h dropout_keeps with core/rng.h uniform_float: 24 bits in [0, 1).
  __device__ float factor(std::uint32_t bits) const {
    return static_cast<float>(bits >> 8) * 0x1p-24f >= probability_ ? keep_scale_ : 0.0f;
  }

  // One element on its own (a draw each: for kernels that visit elements one by one).
  __device__ float factor_at(int query, int key) const {
    const uint4 words = draw(query / 16, key / 16, query % 8, key % 8);
    return factor(philox_word(words, attention_dropout_layout::element_word(static_cast<std::uint64_t>(query),
                                                                            static_cast<std::uint64_t>(key))));
  }

 private:
  std::uint64_t seed_;
  std::uint64_t stream_;
  std::uint64_t head_;
  std::uint64_t blocks_;
  float probability_;
  float keep_scale_;
};

}  // namespace adamant::kernels::cuda::attention_detail
