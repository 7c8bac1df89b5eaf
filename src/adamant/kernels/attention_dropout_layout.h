#pragma once
// Which Philox draw decides each attention-dropout element. Element (query q, key k)
// of one head takes word 2 * ((q / 8) % 2) + (k / 8) % 2 of the draw numbered
//   ((head * blocks + q / 16) * blocks + k / 16) * 64 + (q % 8) * 8 + k % 8,
// blocks = ceil(seq / 16), in the (sample, site) stream of kernels/dropout.h. So one
// draw covers rows {r, r + 8} x columns {c, c + 8} of a 16 x 16 block: exactly what one
// thread holds of a tensor-core accumulator tile (m16n8 fragments), whether the tile is
// scores (queries as rows, forward and the query pass) or their transpose (keys as rows,
// the key pass). Every kernel thus makes one draw per four elements it uses, where a
// layout by consecutive elements would cost one per element in the transposed pass.
// Plain arithmetic, compiled for the host and (under nvcc) the device alike.
#include <cstdint>

#if defined(__CUDACC__)
#define ADAMANT_DROPOUT_LAYOUT_FN __host__ __device__ __forceinline__ constexpr
#else
#define ADAMANT_DROPOUT_LAYOUT_FN constexpr
#endif

namespace adamant::kernels::attention_dropout_layout {

constexpr std::uint64_t kBlock = 16;  // rows and columns of the block a draw lives in

ADAMANT_DROPOUT_LAYOUT_FN std::uint64_t blocks_per_row(std::uint64_t seq) { return (seq + kBlock - 1) / kBlock; }

// Index of the draw of the (query_block, key_block) block's element (query_lane, key_lane),
// lanes being q % 8 and k % 8.
ADAMANT_DROPOUT_LAYOUT_FN std::uint64_t draw_index(std::uint64_t head, std::uint64_t query_block,
                                                   std::uint64_t key_block, std::uint64_t query_lane,
                                                   std::uint64_t key_lane, std::uint64_t blocks) {
  return ((head * blocks + query_block) * blocks + key_block) * 64 + query_lane * 8 + key_lane;
}

ADAMANT_DROPOUT_LAYOUT_FN std::uint64_t element_draw(std::uint64_t head, std::uint64_t query, std::uint64_t key,
                                                     std::uint64_t seq) {
  return draw_index(head, query / kBlock, key / kBlock, query % 8, key % 8, blocks_per_row(seq));
}

// Which of the draw's four words: (upper half of the block's rows) x 2 + (upper half of its columns).
ADAMANT_DROPOUT_LAYOUT_FN unsigned element_word(std::uint64_t query, std::uint64_t key) {
  return static_cast<unsigned>(((query / 8) % 2) * 2 + (key / 8) % 2);
}

}  // namespace adamant::kernels::attention_dropout_layout

#undef ADAMANT_DROPOUT_LAYOUT_FN
