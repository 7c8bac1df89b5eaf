#pragma once
// Which Philox draw, and which 16 bits of it, decide each attention-dropout element.
// Element (query q, key k) of one head is decided by the draw numbered
//   ((head * blocks + q / 16) * blocks + k / 16) * 32 + (q % 8) * 4 + (k % 8) / 2,
// blocks = ceil(seq / 16), in the (sample, site) stream of kernels/dropout.h: its word
// 2 * ((q / 8) % 2) + (k / 8) % 2, low half for an even k and high half for an odd one.
// The element is kept when that half is at least ceil(p * 65536), so p resolves to
// 2^-16.
//
// One draw thus covers rows {r, r + 8} x columns {c, c + 1, c + 8, c + 9} (c even) of a
// 16 x 16 block: exactly what one thread holds of two m16n8 accumulator tiles of scores
// (queries as rows: the forward and the query pass), one draw per eight elements. In the
// transposed tiles of the key pass a thread holds half of two draws; it makes one and
// trades halves with the neighbour that makes the other, so every kernel makes one draw
// per eight elements it uses. Plain arithmetic, compiled for the host and (under nvcc)
// the device alike.
//
// The draws are Philox4x32 with kPhiloxRounds rounds. Regenerating them is most of what
// dropout costs the attention kernels (the forward and both backward passes each make
// every draw again), and seven rounds, the fewest that Philox's authors found to pass
// TestU01's BigCrush, take 7% off the backward with dropout and 9% off the forward
// against the ten of the other generators here.
#include <cstdint>

#if defined(__CUDACC__)
#define ADAMANT_DROPOUT_LAYOUT_FN __host__ __device__ __forceinline__ constexpr
#else
#define ADAMANT_DROPOUT_LAYOUT_FN constexpr
#endif

namespace adamant::kernels::attention_dropout_layout {

constexpr std::uint64_t kBlock = 16;          // rows and columns of the block a draw lives in
constexpr std::uint64_t kDrawsPerBlock = 32;  // 8 row lanes x 4 column pairs
constexpr int kPhiloxRounds = 7;

ADAMANT_DROPOUT_LAYOUT_FN std::uint64_t blocks_per_row(std::uint64_t seq) { return (seq + kBlock - 1) / kBlock; }

// Index of the draw of the (query_block, key_block) block's rows q % 8 = query_lane and
// columns with (k % 8) / 2 = key_pair.
ADAMANT_DROPOUT_LAYOUT_FN std::uint64_t draw_index(std::uint64_t head, std::uint64_t query_block,
                                                   std::uint64_t key_block, std::uint64_t query_lane,
                                                   std::uint64_t key_pair, std::uint64_t blocks) {
  return ((head * blocks + query_block) * blocks + key_block) * kDrawsPerBlock + query_lane * 4 + key_pair;
}

ADAMANT_DROPOUT_LAYOUT_FN std::uint64_t element_draw(std::uint64_t head, std::uint64_t query, std::uint64_t key,
                                                     std::uint64_t seq) {
  return draw_index(head, query / kBlock, key / kBlock, query % 8, (key % 8) / 2, blocks_per_row(seq));
}

// Which of the draw's four words: (upper half of the block's rows) x 2 + (upper half of its columns).
ADAMANT_DROPOUT_LAYOUT_FN unsigned element_word(std::uint64_t query, std::uint64_t key) {
  return static_cast<unsigned>(((query / 8) % 2) * 2 + (key / 8) % 2);
}

// Which half of the word: 0 (low 16 bits) for an even key, 1 for an odd one.
ADAMANT_DROPOUT_LAYOUT_FN unsigned element_half(std::uint64_t key) { return static_cast<unsigned>(key % 2); }

// Halves at or above this keep their element: ceil(p * 65536), exact in float for p in [0, 1).
ADAMANT_DROPOUT_LAYOUT_FN std::uint32_t keep_threshold(float probability) {
  const float scaled = probability * 65536.0f;
  const auto whole = static_cast<std::uint32_t>(scaled);
  return static_cast<float>(whole) < scaled ? whole + 1 : whole;
}

ADAMANT_DROPOUT_LAYOUT_FN bool keeps(std::uint32_t word, unsigned half, std::uint32_t threshold) {
  return ((word >> (16 * half)) & 0xffffu) >= threshold;
}

}  // namespace adamant::kernels::attention_dropout_layout

#undef ADAMANT_DROPOUT_LAYOUT_FN
