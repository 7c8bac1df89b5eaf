#pragma once
// The score gradients a key pass can leave for the query pass (BackwardOperands::d_scores)
// so that the query pass makes one product a tile, dq^T = k^T ds^T, instead of recomputing
// the scores and their gradients. Per (sample, head), for every key tile kt and query tile
// qt >= kt of kStreamRows rows each, one tile of ds^T [keys][queries] in bf16 as the
// 128-byte-swizzled image of a shared tile (wgmma.cuh): the key pass stores its
// accumulators' pairs as they are, and the query pass copies the image into shared memory
// byte for byte and reads it as an MN-major operand. A query tile's images lie together,
// by key tile. Only for *.cu files.
#include <cstddef>
#include <cstdint>

#include "adamant/kernels/cuda/wgmma.cuh"
#include "adamant/kernels/flash_attention_scores.h"

namespace adamant::kernels::cuda::flash_detail {

constexpr std::size_t kScoreTileBytes = swizzled_tile_bytes<kPanelColumns, kStreamRows>();
static_assert(kStreamRows == kPanelColumns && kStreamRows == kFlashScoreTileRows,
              "a score tile is one panel of keys x queries, as kernels/flash_attention.h sizes them");

__host__ __device__ constexpr std::int64_t score_tiles_per_head(int seq) {
  const std::int64_t tiles = (seq + kStreamRows - 1) / kStreamRows;
  return tiles * (tiles + 1) / 2;
}

// Byte offset of tile (key tile, query tile) of (sample, head) = head_index.
__device__ __forceinline__ std::int64_t score_tile_offset(int head_index, int seq, int key_tile, int query_tile) {
  const std::int64_t tile = static_cast<std::int64_t>(head_index) * score_tiles_per_head(seq) +
                            static_cast<std::int64_t>(query_tile) * (query_tile + 1) / 2 + key_tile;
  return tile * static_cast<std::int64_t>(kScoreTileBytes);
}

}  // namespace adamant::kernels::cuda::flash_detail
