#pragma once
// The score gradients a key pass can leave for the query pass (BackwardOperands::d_scores)
// so that the query pass makes one product a tile, dq^T = k^T ds^T, instead of recomputing
// the scores and their gradients. Per (sample, head), for every key tile kt and query tile
// qt >= kt of kStreamRows rows each, one tile of ds^T [keys][queries] in bf16 as the
// 128-byte-swizzled image of a shared tile (wgmma.cuh): the key pass stores its
// accumulators' pairs as they are, and the query pass copies the image into shared memory
// byte for byte and reads it as an MN-major operand. A query tile's images lie together,
// by key tile. The key pass writes each image into shared memory first (stmatrix) and each
// warp stores its own 16 rows, 2 KB in a row of the image, with one bulk copy (the async
// proxy's shared-to-global cp.async.bulk), so the image leaves as whole lines while the
// warp goes on, with no barrier across its warpgroup. Only for *.cu files.
#include <cstddef>
#include <cstdint>

#include "adamant/kernels/cuda/wgmma.cuh"
#include "adamant/kernels/flash_attention_scores.h"

namespace adamant::kernels::cuda::flash_detail {

constexpr std::size_t kScoreTileBytes = swizzled_tile_bytes<kStreamRows, kStreamRows>();
static_assert(Panels<kStreamRows>::kCount == 1 && kStreamRows == kFlashScoreTileRows,
              "a score tile is one panel of keys x queries, as kernels/flash_attention.h sizes them");

__host__ __device__ constexpr std::int64_t score_tiles_per_head(int seq) {
  const std::int64_t tiles = (seq + kStreamRows - 1) / kStreamRows;
  return tiles * (tiles + 1) / 2;
}

// Byte offset of tile (key tile, query tile) of the launch's slot `slot` (BlockOrder::slot: the
// scratch holds the slots of the group being run, Problem::first_slot on).
__device__ __forceinline__ std::int64_t score_tile_offset(int slot, int seq, int key_tile, int query_tile) {
  const std::int64_t tile = static_cast<std::int64_t>(slot) * score_tiles_per_head(seq) +
                            static_cast<std::int64_t>(query_tile) * (query_tile + 1) / 2 + key_tile;
  return tile * static_cast<std::int64_t>(kScoreTileBytes);
}

// The inverse of ldmatrix: lanes 8 i .. 8 i + 7 give the row addresses of matrix i,
// whose elements (row group, columns 2 pair + {0, 1}) are r[i] of lane 4 group + pair.
__device__ __forceinline__ void store_matrices(const std::uint32_t (&r)[4], std::uint32_t address) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(address), "r"(r[0]),
               "r"(r[1]), "r"(r[2]), "r"(r[3])
               : "memory");
}

}  // namespace adamant::kernels::cuda::flash_detail
