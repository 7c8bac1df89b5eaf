#pragma once
// The attention dropout mask on the device, bit-identical to kernels/dropout.h (which
// does not compile under nvcc), so that GPU and CPU drop the same elements. Only for
// *.cu files.
#include <cuda_runtime.h>

#include <cstdint>

#include "adamant/kernels/attention_dropout_layout.h"
#include "adamant/kernels/cuda/flash_attention_launchers.h"
#include "adamant/kernels/cuda/philox.cuh"

namespace adamant::kernels::cuda::attention_detail {

// Dropout factors (0 or the keep scale) of one sample's attention elements, in the draw
// layout of kernels/attention_dropout_layout.h: one draw decides sixteen elements, rows
// {r, r + 8} x columns {c, c + 1} + {0, 8, 16, 24} of a 16 x 32 block, a byte each.
class DropoutMask {
 public:
  __device__ DropoutMask(const flash_attention_launchers::Dropout& dropout, int sample, int head, int seq)
      : seed_(dropout.seed),
        stream_(dropout.stream_base + (static_cast<std::uint64_t>(sample) +
                                       (dropout.sample_offset != nullptr ? *dropout.sample_offset : std::uint64_t{0})) *
                                          dropout.stream_per_sample),
        head_(static_cast<std::uint64_t>(head)),
        blocks_(attention_dropout_layout::blocks_of(static_cast<std::uint64_t>(seq))),
        keep_from_(attention_dropout_layout::keep_threshold(dropout.probability) << 24),
        keep_scale_(dropout.keep_scale) {}

  // The four words of block (query_block, key_block)'s draw (16 queries, 32 keys) for rows
  // q % 8 = query_lane and columns (k % 8) / 2 = key_pair.
  __device__ uint4 draw(int query_block, int key_block, int query_lane, int key_pair) const {
    const PhiloxWords words = philox_draw<attention_dropout_layout::kPhiloxRounds>(
        seed_,
        attention_dropout_layout::draw_index(
            head_, static_cast<std::uint64_t>(query_block), static_cast<std::uint64_t>(key_block),
            static_cast<std::uint64_t>(query_lane), static_cast<std::uint64_t>(key_pair), blocks_),
        stream_);
    return make_uint4(words.word[0], words.word[1], words.word[2], words.word[3]);
  }

  // Whether the element whose byte is byte `byte` of `word` is kept
  // (attention_dropout_layout::keeps): with that byte shifted to the top and the lower ones
  // below it, the word is at least t * 2^24 exactly when the byte is at least t.
  __device__ bool kept(std::uint32_t word, unsigned byte) const { return (word << (24 - 8 * byte)) >= keep_from_; }

  // The factor (0 or the keep scale) of that element.
  __device__ float factor(std::uint32_t word, unsigned byte) const { return kept(word, byte) ? keep_scale_ : 0.0f; }

  __device__ float keep_scale() const { return keep_scale_; }

  // Factors of the scores tiles a thread holds with queries as rows: element e of its n8
  // tiles t = 0..3 of one 32-key step (rows {group, group + 8} x keys {8 t + 2 pair + j}).
  // `words` is draw (query block, key block, group, pair).
  __device__ void row_factors(const uint4& words, float (&factors)[4][4]) const {
    const std::uint32_t tile_words[4] = {words.x, words.y, words.z, words.w};
#pragma unroll
    for (int t = 0; t < 4; ++t) {
#pragma unroll
      for (unsigned e = 0; e < 4; ++e) factors[t][e] = factor(tile_words[t], e);
    }
  }

  // Zeroes the dropped scores of one key tile (queries as rows: the warp's rows from
  // warp_first, kKeyTiles n8 tiles of keys from first_key, a multiple of 32); the kept ones
  // are left for the caller to scale by keep_scale() once, at the end. Draw m decides n8
  // tiles 4 m .. 4 m + 3, word t tile 4 m + t.
  template <int kKeyTiles>
  __device__ void drop_in_rows(float (&scores)[kKeyTiles][4], int warp_first, int first_key, int group,
                               int pair) const {
    static_assert(kKeyTiles % 4 == 0, "a draw decides four n8 tiles");
#pragma unroll
    for (int m = 0; m < kKeyTiles / 4; ++m) {
      const uint4 words = draw(warp_first / 16, first_key / 32 + m, group, pair);
      const std::uint32_t tile_words[4] = {words.x, words.y, words.z, words.w};
#pragma unroll
      for (int t = 0; t < 4; ++t) {
#pragma unroll
        for (unsigned e = 0; e < 4; ++e) {
          if (!kept(tile_words[t], e)) scores[4 * m + t][e] = 0.0f;
        }
      }
    }
  }

  // The draw that decides a key-pass lane's elements of one 16-query step: keys {group,
  // group + 8} of a warp's 16 keys as rows x queries {query_block's 16 + 8 t + 2 pair + j}
  // as columns. They lie in the draws of query lanes 2 pair + j, key pair group / 2: words
  // 2 u and 2 u + 1 (keys group and group + 8, u the half of the 32-key block the warp's keys
  // are), bytes 2 t + (group % 2). The lane of even group makes the draw of j = 0 and its
  // neighbour (lane ^ 4, odd group, same pair) that of j = 1; the two warps of the block's
  // halves need the same draws.
  __device__ uint4 key_draw(int query_block, int key_block32, int group, int pair) const {
    return draw(query_block, key_block32, 2 * pair + (group & 1), group / 2);
  }

  // The words that decide the lane's transposed tiles, from the two words of its keys
  // (words 2 u and 2 u + 1 of key_draw): element e = 2 h + j of n8 tile t in byte e of
  // tile_words[t] (test it with kept). Each lane keeps the bytes of its key parity and sends
  // the neighbour the other's.
  __device__ void column_words(uint2 key_words, int group, std::uint32_t (&tile_words)[2]) const {
    const unsigned odd = static_cast<unsigned>(group) & 1u;
    // Bytes 2 t + parity of both words, packed as byte t + 2 h: this lane's key parity, and
    // the neighbour's.
    const std::uint32_t own = __byte_perm(key_words.x, key_words.y, odd != 0u ? 0x7531u : 0x6420u);
    const std::uint32_t sent = __byte_perm(key_words.x, key_words.y, odd != 0u ? 0x6420u : 0x7531u);
    const std::uint32_t received = __shfl_xor_sync(0xffffffffu, sent, 4);
    // Element e = 2 h + j of tile t: j = 0 from the even lane's draw, j = 1 from the odd one's.
    tile_words[0] = __byte_perm(own, received, odd != 0u ? 0x2604u : 0x6240u);
    tile_words[1] = __byte_perm(own, received, odd != 0u ? 0x3715u : 0x7351u);
  }

 private:
  std::uint64_t seed_;
  std::uint64_t stream_;
  std::uint64_t head_;
  attention_dropout_layout::Blocks blocks_;
  std::uint32_t keep_from_;  // t * 2^24 for the threshold t = min(ceil(p * 256), 255)
  float keep_scale_;
};

}  // namespace adamant::kernels::cuda::attention_detail
