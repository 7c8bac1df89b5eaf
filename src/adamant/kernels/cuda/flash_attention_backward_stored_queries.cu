// Query pass of the flash attention backward from stored score gradients
// (flash_attention_stored_scores.cuh), for every head size: one block of two warpgroups
// per (sample, head, 128 queries), each warpgroup owning one 64-query tile. Per key tile
// up to the diagonal, the key tile and the warpgroups' ds^T tiles stream through shared
// memory (tensor-memory and bulk copies on stage barriers, flash_attention_stages.cuh),
// and a warpgroup makes
//   dq += ds k   (m64 queries x n head size: ds^T and k both MN-major in shared memory)
// in place of the scores, their softmax, dropout and gradients the recomputing query
// pass makes (flash_attention_backward_queries.cu). dq is scaled by 1/sqrt(d) (and with
// dropout by the 1/(1-p) the key pass leaves out of the stored gradients) and each warp
// stores its 16 rows in whole 16-byte chunks through its own staging rows.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "adamant/kernels/cuda/flash_attention_backward_passes.h"
#include "adamant/kernels/cuda/flash_attention_block.cuh"
#include "adamant/kernels/cuda/flash_attention_dispatch.cuh"
#include "adamant/kernels/cuda/flash_attention_stages.cuh"
#include "adamant/kernels/cuda/flash_attention_stored_scores.cuh"
#include "adamant/kernels/cuda/flash_attention_tiles.cuh"
#include "adamant/kernels/cuda/wgmma.cuh"

namespace adamant::kernels::cuda::flash_attention_launchers {

namespace {

using namespace flash_detail;  // NOLINT(build/namespaces): the kernels' own helpers

template <int kHeadDim>
struct StoredQueryPassConfig {
  static constexpr int kStages = 3;  // tile i in use, tiles i + 1 and i + 2 landing
  static constexpr std::size_t kKeyTile = swizzled_tile_bytes<kHeadDim, kStreamRows>();
  static constexpr std::size_t kStageBytes = kKeyTile + 2 * kScoreTileBytes;  // keys, then each warpgroup's ds^T
  // Each warp's 16 rows of dq on their way out, apart from the stages (the other
  // warpgroup may still be reading them).
  static constexpr std::size_t kStaging = kStages * kStageBytes;
  static constexpr std::size_t kBytes = kStaging + swizzled_tile_bytes<kHeadDim, kBlockRows>() + kSwizzleAlignment;
};

template <int kHeadDim>
__global__ void __launch_bounds__(kThreads)
    flash_backward_stored_query_kernel(const __grid_constant__ CUtensorMap qkv_map, BackwardOperands operands,
                                       Problem problem, float scale) {
  using Config = StoredQueryPassConfig<kHeadDim>;
  constexpr int kStages = Config::kStages;
  constexpr int kOutTiles = kHeadDim / 8;
  extern __shared__ unsigned char shared_raw[];
  __shared__ StageBarriers<kStages> stages;
  unsigned char* shared = align_shared<kSwizzleAlignment>(shared_raw);

  const BlockOrder order = head_grouped_order();
  const BlockPlace<kHeadDim> place(problem, order.slot);
  const auto& [seq, sample, head, warp, lane, group, pair, channels, token_stride, sample_token] = place;
  const int first_query = first_row_longest_first(order);
  const auto [warpgroup, group_first, group_last, group_active] = WarpgroupRows(warp, first_query, seq);
  const int query_tiles = (seq + kStreamRows - 1) / kStreamRows;
  const int first_tile = first_query / kStreamRows;  // the first warpgroup's query tile
  const int own_tile = first_tile + warpgroup;
  const int key_tiles = min(first_tile + 2, query_tiles);  // up to the block's last query tile
  const auto* scores = reinterpret_cast<const unsigned char*>(operands.d_scores);
  const int slot = order.slot;  // in the scratch
  auto has_image = [&](int key_tile, int query_tile) { return key_tile <= query_tile && query_tile < query_tiles; };

  // Thread 0 issues every copy: the key tile by its tensor map, the warpgroups' images
  // (8 KB each, whole in the scratch) by one bulk copy each; a warpgroup without a tile
  // there skips it. The images are read once and marked first to leave L2, which keeps
  // the key tiles that every query block of the head reads again.
  const bool copier = threadIdx.x == 0;
  const std::uint64_t read_once = copier ? detail::evict_first_policy() : 0;
  auto load = [&](int key_tile) {
    unsigned char* stage = shared + static_cast<std::size_t>(key_tile % kStages) * Config::kStageBytes;
    std::uint32_t bytes = static_cast<std::uint32_t>(Config::kKeyTile);
    for (int w = 0; w < 2; ++w) bytes += has_image(key_tile, first_tile + w) ? kScoreTileBytes : 0u;
    std::uint64_t* full = stages.reserve(key_tile, bytes);
    copy_rows_async<kHeadDim, kStreamRows>(stage, &qkv_map, static_cast<int>(channels) + head * kHeadDim,
                                           key_tile * kStreamRows, sample, full);
    for (int w = 0; w < 2; ++w) {
      if (!has_image(key_tile, first_tile + w)) continue;
      detail::copy_bytes_async<static_cast<std::uint32_t>(kScoreTileBytes)>(
          stage + Config::kKeyTile + w * kScoreTileBytes,
          scores + score_tile_offset(slot, seq, key_tile, first_tile + w), full, read_once);
    }
  };
  if (copier) stages.init();
  __syncthreads();
  if (copier) {
    for (int ahead = 0; ahead < kStages - 1 && ahead < key_tiles; ++ahead) load(ahead);
  }

  float dq[kOutTiles][4];
#pragma unroll
  for (int n = 0; n < kOutTiles; ++n) dq[n][0] = dq[n][1] = dq[n][2] = dq[n][3] = 0.0f;
  fence_accumulators(dq);  // set before any product is issued
  for (int key_tile = 0; key_tile < key_tiles; ++key_tile) {
    // Tile key_tile + kStages - 1 goes where tile key_tile - 1 was, once every warp is done with it.
    if (copier && key_tile + kStages - 1 < key_tiles) load(key_tile + kStages - 1);
    __syncwarp();
    stages.wait_full(key_tile);
    if (has_image(key_tile, own_tile)) {
      const unsigned char* stage = shared + static_cast<std::size_t>(key_tile % kStages) * Config::kStageBytes;
      const std::uint32_t key_address = shared_address(stage);
      const std::uint32_t score_address = shared_address(stage + Config::kKeyTile + warpgroup * kScoreTileBytes);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kStreamRows / 16; ++kk) {
        mma_shared_mn<kHeadDim>(dq, mn_major<kStreamRows, kStreamRows>(score_address, kk),
                                mn_major<kHeadDim, kStreamRows>(key_address, kk));
      }
      wgmma_commit();
      wgmma_wait<0>();
      fence_accumulators(dq);
    }
    stages.release(key_tile, lane);  // this warp is done with the stage
  }
  if (!group_active) return;

  // Warp w holds dq of queries own_tile * 64 + 16 (w % 4) .. + 15, as the other passes' accumulators.
  const int warp_first = own_tile * kStreamRows + (warp % 4) * kWarpRows;
  store_warp_rows_swizzled<kHeadDim, kBlockRows>(dq, scale, scale, shared + Config::kStaging, warp * kWarpRows,
                                                 operands.d_qkv + sample_token * token_stride + head * kHeadDim,
                                                 token_stride, warp_first, seq,
                                                 place.bias_partials(operands.bias_partials, 0, warp_first));
}

}  // namespace

cudaError_t launch_backward_stored_query_pass(const BackwardMaps& maps, const BackwardOperands& operands,
                                              const Problem& problem, const Dropout& dropout, cudaStream_t stream) {
  return with_supported_head_dim_and_dropout(problem.head_dim, false, [&](auto head, auto) {
    constexpr int kHeadDim = decltype(head)::value;
    const float scale = (dropout.enabled ? dropout.keep_scale : 1.0f) / std::sqrt(static_cast<float>(kHeadDim));
    return launch_over_row_blocks(flash_backward_stored_query_kernel<kHeadDim>, StoredQueryPassConfig<kHeadDim>::kBytes,
                                  problem, stream, maps.qkv, operands, problem, scale);
  });
}

}  // namespace adamant::kernels::cuda::flash_attention_launchers
