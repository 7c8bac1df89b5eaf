#pragma once
// Which Philox draw, and which byte of it, decide each attention-dropout element.
// Element (query q, key k) of one head is decided by the draw numbered
//   ((head * query_blocks + q / 16) * key_blocks + k / 32) * 32 + (q % 8) * 4 + (k % 8) / 2,
// query_blocks = ceil(seq / 16), key_blocks = ceil(seq / 32), in the (sample, site)
// stream of kernels/dropout.h: its word (k % 32) / 8, byte 2 * ((q / 8) % 2) + k % 2.
// The element is kept when that byte is at least t = min(ceil(p * 256), 255), so p
// resolves to 1/256 (as the 8-bit draws of other fused attention kernels do), and a kept
// element is scaled by 1/(1 - t/256), the inverse of the probability it is actually
// kept with, so that dropout leaves every expectation unchanged.
//
// One draw thus covers rows {r, r + 8} x columns {c, c + 1} + {0, 8, 16, 24} (c even) of
// a 16 x 32 block: exactly what one thread holds of four m16n8 accumulator tiles of
// scores (queries as rows: the forward and the recomputing query pass), word w deciding
// tile w, byte e its accumulator element e. In the transposed tiles of the key pass a
// warp holds 16 keys, half a draw's 32: a thread takes the draw's two words of its keys,
// keeps the bytes of its key parity and trades the others with the neighbour that makes
// the draw of the other query parity, and the warp of the block's other 16 keys, which
// needs the same draws, makes every other step's and trades words through shared memory,
// so that each pass makes every draw once. Plain arithmetic, compiled for the host and
// (under nvcc) the device alike.
//
// The draws are Philox4x32 with kPhiloxRounds rounds. Regenerating them is most of what
// dropout costs the attention kernels (the forward and the key pass each make every draw
// again), and seven rounds, the fewest that Philox's authors found to pass TestU01's
// BigCrush, take 7% off the backward with dropout and 9% off the forward against the ten
// of the other generators here.
#include <cstdint>

#if defined(__CUDACC__)
#define ADAMANT_DROPOUT_LAYOUT_FN __host__ __device__ __forceinline__ constexpr
#else
#define ADAMANT_DROPOUT_LAYOUT_FN constexpr
#endif

namespace adamant::kernels::attention_dropout_layout {

constexpr std::uint64_t kQueryBlock = 16;     // rows of the block a draw lives in
constexpr std::uint64_t kKeyBlock = 32;       // columns of that block
constexpr std::uint64_t kDrawsPerBlock = 32;  // 8 row lanes x 4 column pairs
constexpr int kPhiloxRounds = 7;

ADAMANT_DROPOUT_LAYOUT_FN std::uint64_t query_blocks(std::uint64_t seq) {
  return (seq + kQueryBlock - 1) / kQueryBlock;
}
ADAMANT_DROPOUT_LAYOUT_FN std::uint64_t key_blocks(std::uint64_t seq) { return (seq + kKeyBlock - 1) / kKeyBlock; }

// The blocks of one head: ceil(seq / 16) rows of ceil(seq / 32), computed once by a kernel.
struct Blocks {
  std::uint64_t query_blocks;
  std::uint64_t key_blocks;
};

ADAMANT_DROPOUT_LAYOUT_FN Blocks blocks_of(std::uint64_t seq) { return Blocks{query_blocks(seq), key_blocks(seq)}; }

// Index of the draw of the (query_block, key_block) block's rows q % 8 = query_lane and
// columns with (k % 8) / 2 = key_pair.
ADAMANT_DROPOUT_LAYOUT_FN std::uint64_t draw_index(std::uint64_t head, std::uint64_t query_block,
                                                   std::uint64_t key_block, std::uint64_t query_lane,
                                                   std::uint64_t key_pair, Blocks blocks) {
  return ((head * blocks.query_blocks + query_block) * blocks.key_blocks + key_block) * kDrawsPerBlock +
         query_lane * 4 + key_pair;
}

// Which of the draw's four words: the key's 8-column group within the block.
ADAMANT_DROPOUT_LAYOUT_FN unsigned element_word(std::uint64_t key) {
  return static_cast<unsigned>((key % kKeyBlock) / 8);
}

// Which byte of the word: (upper half of the block's rows) x 2 + the key's parity, the
// element's index in its thread's m16n8 accumulator tile.
ADAMANT_DROPOUT_LAYOUT_FN unsigned element_byte(std::uint64_t query, std::uint64_t key) {
  return static_cast<unsigned>(((query / 8) % 2) * 2 + key % 2);
}

// Bytes at or above this keep their element: min(ceil(p * 256), 255), exact in float for
// p in [0, 1); every p above 254/256 keeps 1 in 256.
ADAMANT_DROPOUT_LAYOUT_FN std::uint32_t keep_threshold(float probability) {
  const float scaled = probability * 256.0f;
  const auto whole = static_cast<std::uint32_t>(scaled);
  const std::uint32_t ceiling = static_cast<float>(whole) < scaled ? whole + 1 : whole;
  return ceiling < 255u ? ceiling : 255u;
}

// The factor of a kept element: 1 over the probability (256 - t) / 256 that it is kept,
// in the precision of the kernel that applies it (fp32 on the GPU).
template <typename T = float>
ADAMANT_DROPOUT_LAYOUT_FN T keep_scale(float probability) {
  return T(256) / static_cast<T>(256u - keep_threshold(probability));
}

ADAMANT_DROPOUT_LAYOUT_FN bool keeps(std::uint32_t word, unsigned byte, std::uint32_t threshold) {
  return ((word >> (8 * byte)) & 0xffu) >= threshold;
}

}  // namespace adamant::kernels::attention_dropout_layout

#undef ADAMANT_DROPOUT_LAYOUT_FN
