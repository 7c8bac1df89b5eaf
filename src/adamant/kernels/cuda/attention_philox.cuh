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

// Dropout factors (0 or 1/(1-p)) of one sample's attention elements, in the draw
// layout of kernels/attention_dropout_layout.h: one draw decides eight elements, rows
// {r, r + 8} x columns {c, c + 1, c + 8, c + 9} of a 16 x 16 block, 16 bits each.
class DropoutMask {
 public:
  __device__ DropoutMask(const flash_attention_launchers::Dropout& dropout, int sample, int head, int seq)
      : seed_(dropout.seed),
        stream_(dropout.stream_base + (static_cast<std::uint64_t>(sample) +
                                       (dropout.sample_offset != nullptr ? *dropout.sample_offset : std::uint64_t{0})) *
                                          dropout.stream_per_sample),
        head_(static_cast<std::uint64_t>(head)),
        blocks_(attention_dropout_layout::blocks_per_row(static_cast<std::uint64_t>(seq))),
        keep_above_(static_cast<std::uint32_t>(
            static_cast<std::uint64_t>(attention_dropout_layout::keep_threshold(dropout.probability)) * 65536u - 1u)),
        keep_scale_(dropout.keep_scale) {}

  // The four words of block (query_block, key_block)'s draw for rows q % 8 = query_lane
  // and columns (k % 8) / 2 = key_pair.
  __device__ uint4 draw(int query_block, int key_block, int query_lane, int key_pair) const {
    const PhiloxWords words = philox_draw<attention_dropout_layout::kPhiloxRounds>(
        seed_,
        attention_dropout_layout::draw_index(
            head_, static_cast<std::uint64_t>(query_block), static_cast<std::uint64_t>(key_block),
            static_cast<std::uint64_t>(query_lane), static_cast<std::uint64_t>(key_pair), blocks_),
        stream_);
    return make_uint4(words.word[0], words.word[1], words.word[2], words.word[3]);
  }

  // Whether the element whose 16 bits are half `half` (0 low, 1 high) of `word` is kept
  // (attention_dropout_layout::keeps): a half h is at least the threshold t exactly when
  // h * 65536 + (anything below 65536) > t * 65536 - 1, so one unsigned comparison of
  // the word (the low half shifted up first) decides it, for every t in [1, 65536].
  __device__ bool kept(std::uint32_t word, unsigned half) const {
    return (half == 0 ? word << 16 : word) > keep_above_;
  }

  // The factor (0 or 1/(1-p)) of that element.
  __device__ float factor(std::uint32_t word, unsigned half) const { return kept(word, half) ? keep_scale_ : 0.0f; }

  __device__ float keep_scale() const { return keep_scale_; }

  // Factors of the scores tiles a thread holds with queries as rows: rows {group,
  // group + 8} x keys {16 m + 2 pair + j, + 8} of one 16-key step, elements e = 2 h + j
  // of its n8 tiles 0 and 1 (the forward and the query pass). `words` is draw
  // (query block, key block, group, pair).
  __device__ void row_factors(const uint4& words, float (&factors)[2][4]) const {
#pragma unroll
    for (unsigned j = 0; j < 2; ++j) {
      factors[0][j] = factor(words.x, j);
      factors[1][j] = factor(words.y, j);
      factors[0][2 + j] = factor(words.z, j);
      factors[1][2 + j] = factor(words.w, j);
    }
  }

  // Zeroes the dropped scores of one key tile (queries as rows: the warp's rows from
  // warp_first, kKeyTiles n8 tiles of keys from first_key); the kept ones are left for the
  // caller to scale by keep_scale() once, at the end. Draw m decides rows {group, group + 8}
  // x keys {16 m + 2 pair + j, + 8}, n8 tiles 2 m and 2 m + 1 (as row_factors lays them out).
  template <int kKeyTiles>
  __device__ void drop_in_rows(float (&scores)[kKeyTiles][4], int warp_first, int first_key, int group,
                               int pair) const {
#pragma unroll
    for (int m = 0; m < kKeyTiles / 2; ++m) {
      const uint4 words = draw(warp_first / 16, first_key / 16 + m, group, pair);
      const std::uint32_t tile_words[2][2] = {{words.x, words.z}, {words.y, words.w}};  // [n8 tile][row half]
#pragma unroll
      for (int t = 0; t < 2; ++t) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          if (!kept(tile_words[t][e >> 1], static_cast<unsigned>(e & 1))) scores[2 * m + t][e] = 0.0f;
        }
      }
    }
  }

  // The words that decide the transposed tiles of the key pass: keys {group, group + 8} of
  // the warp's block as rows x queries {16-query step + 8 t + 2 pair + j} as columns,
  // element e = 2 h + j of n8 tile t in half h of words[t][j]. They lie in draws (query
  // lane 2 pair + j, key pair group / 2) for j = 0 and 1, in the halves of the key's parity
  // group % 2. The lane of even group draws j = 0 and its neighbour (lane ^ 4, odd group,
  // same pair) j = 1; each keeps its own parity's halves and sends the neighbour the other's.
  __device__ void column_words(int query_block, int key_block, int group, int pair,
                               std::uint32_t (&tile_words)[2][2]) const {
    const unsigned odd = static_cast<unsigned>(group) & 1u;
    const uint4 words = draw(query_block, key_block, 2 * pair + static_cast<int>(odd), group / 2);
    // __byte_perm selectors: the low halves of (x, y) packed low-first, or the high halves.
    const unsigned own_select = odd != 0u ? 0x7632u : 0x5410u;
    const unsigned other_select = odd != 0u ? 0x5410u : 0x7632u;
    // Packed per tile t: (word 2 t, h = 0) in the low half, (word 2 t + 1, h = 1) in the high.
    const std::uint32_t own[2] = {__byte_perm(words.x, words.y, own_select), __byte_perm(words.z, words.w, own_select)};
    const std::uint32_t sent[2] = {__byte_perm(words.x, words.y, other_select),
                                   __byte_perm(words.z, words.w, other_select)};
    const std::uint32_t received[2] = {__shfl_xor_sync(0xffffffffu, sent[0], 4),
                                       __shfl_xor_sync(0xffffffffu, sent[1], 4)};
#pragma unroll
    for (int t = 0; t < 2; ++t) {
      tile_words[t][0] = odd != 0u ? received[t] : own[t];  // j = 0
      tile_words[t][1] = odd != 0u ? own[t] : received[t];  // j = 1
    }
  }

  // The factors (0 or 1/(1-p)) of those elements: factors[t][e] of element e of n8 tile t.
  __device__ void column_factors(int query_block, int key_block, int group, int pair, float (&factors)[2][4]) const {
    std::uint32_t tile_words[2][2];
    column_words(query_block, key_block, group, pair, tile_words);
#pragma unroll
    for (int t = 0; t < 2; ++t) {
#pragma unroll
      for (unsigned e = 0; e < 4; ++e) factors[t][e] = factor(tile_words[t][e & 1u], e >> 1);
    }
  }

 private:
  std::uint64_t seed_;
  std::uint64_t stream_;
  std::uint64_t head_;
  std::uint64_t blocks_;
  std::uint32_t keep_above_;  // t * 65536 - 1 for the threshold t = ceil(p * 65536) >= 1
  float keep_scale_;
};

}  // namespace adamant::kernels::cuda::attention_detail
