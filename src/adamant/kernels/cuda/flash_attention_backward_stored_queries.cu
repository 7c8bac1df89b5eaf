// Query pass of the flash attention backward from stored score gradients
// (flash_attention_stored_scores.cuh), for head sizes 64 and 128: one block of two
// warpgroups per (sample, head, 128 queries), each warpgroup owning one 64-query tile.
// Per key tile up to the diagonal, the key tile and the warpgroups' ds^T tiles stream
// through shared memory (tensor-memory and bulk copies on stage barriers,
// flash_attention_stages.cuh), and a warpgroup makes
//   dq^T += k^T ds^T   (both MN-major in shared memory, d / 64 products of m64n64)
// in place of the scores, their softmax, dropout and gradients the recomputing query
// pass makes (flash_attention_backward_queries.cu). dq is scaled by 1/sqrt(d) (and
// with dropout by the 1/(1-p) the key pass leaves out of the stored gradients) and
// transposed on its store.
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
  static constexpr std::size_t kBytes = kStages * kStageBytes + kSwizzleAlignment;
};

template <int kHeadDim>
__global__ void __launch_bounds__(kThreads)
    flash_backward_stored_query_kernel(const __grid_constant__ CUtensorMap qkv_map, BackwardOperands operands,
                                       Problem problem, float scale) {
  using Config = StoredQueryPassConfig<kHeadDim>;
  constexpr int kStages = Config::kStages;
  constexpr int kHalves = kHeadDim / kGroupRows;  // m64 halves of dq^T's d rows
  extern __shared__ unsigned char shared_raw[];
  __shared__ StageBarriers<kStages> stages;
  unsigned char* shared = align_shared<kSwizzleAlignment>(shared_raw);

  const BlockPlace<kHeadDim> place(problem);
  const auto& [seq, sample, head, warp, lane, group, pair, channels, token_stride, sample_token] = place;
  const int first_query = first_row_longest_first();
  const auto [warpgroup, group_first, group_last, group_active] = WarpgroupRows(warp, first_query, seq);
  const int query_tiles = (seq + kStreamRows - 1) / kStreamRows;
  const int first_tile = first_query / kStreamRows;  // the first warpgroup's query tile
  const int own_tile = first_tile + warpgroup;
  const int key_tiles = min(first_tile + 2, query_tiles);  // up to the block's last query tile
  const auto* scores = reinterpret_cast<const unsigned char*>(operands.d_scores);
  const int slot = static_cast<int>(blockIdx.x);  // in the scratch
  auto has_image = [&](int key_tile, int query_tile) { return key_tile <= query_tile && query_tile < query_tiles; };

  // Thread 0 issues every copy: the key tile by its tensor map, the warpgroups' images
  // (8 KB each, whole in the scratch) by one bulk copy each; a warpgroup without a tile
  // there skips it.
  const bool copier = threadIdx.x == 0;
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
          scores + score_tile_offset(slot, seq, key_tile, first_tile + w), full);
    }
  };
  if (copier) stages.init();
  __syncthreads();
  if (copier) {
    for (int ahead = 0; ahead < kStages - 1 && ahead < key_tiles; ++ahead) load(ahead);
  }

  float dq_t[kHalves][8][4];
#pragma unroll
  for (int h = 0; h < kHalves; ++h) {
#pragma unroll
    for (int t = 0; t < 8; ++t) dq_t[h][t][0] = dq_t[h][t][1] = dq_t[h][t][2] = dq_t[h][t][3] = 0.0f;
  }
#pragma unroll
  for (int h = 0; h < kHalves; ++h) fence_accumulators(dq_t[h]);  // set before any product is issued
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
      for (int h = 0; h < kHalves; ++h) {
#pragma unroll
        for (int kk = 0; kk < kStreamRows / 16; ++kk) {
          mma_shared_mn(
              dq_t[h],
              mn_major<kHeadDim, kStreamRows>(key_address + h * Panels<kHeadDim>::template bytes<kStreamRows>(), kk),
              mn_major<kStreamRows, kStreamRows>(score_address, kk));
        }
      }
      wgmma_commit();
      wgmma_wait<0>();
#pragma unroll
      for (int h = 0; h < kHalves; ++h) fence_accumulators(dq_t[h]);
    }
    stages.release(key_tile, lane);  // this warp is done with the stage
  }
  if (!group_active) return;

  // dq^T row d = 64 h + 16 (warp % 4) + group (+ 8), columns queries 8 t + 2 pair + {0, 1}.
  std::uint16_t* dq_base = operands.d_qkv + sample_token * token_stride + head * kHeadDim;
  const int first_own_query = own_tile * kStreamRows;
#pragma unroll
  for (int h = 0; h < kHalves; ++h) {
#pragma unroll
    for (int t = 0; t < 8; ++t) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int query = first_own_query + 8 * t + 2 * pair + (e & 1);
        const int d = h * kGroupRows + (warp % 4) * kWarpRows + group + (e >> 1) * 8;
        if (query < seq) {
          dq_base[static_cast<std::int64_t>(query) * token_stride + d] =
              static_cast<std::uint16_t>(pack_bf16(dq_t[h][t][e] * scale, 0.0f) & 0xffffu);
        }
      }
    }
  }
}

}  // namespace

cudaError_t launch_backward_stored_query_pass(const BackwardMaps& maps, const BackwardOperands& operands,
                                              const Problem& problem, const Dropout& dropout, cudaStream_t stream) {
  return with_stored_scores_head_dim(problem.head_dim, [&](auto head, auto) {
    constexpr int kHeadDim = decltype(head)::value;
    const float scale = (dropout.enabled ? dropout.keep_scale : 1.0f) / std::sqrt(static_cast<float>(kHeadDim));
    return launch_over_row_blocks(flash_backward_stored_query_kernel<kHeadDim>, StoredQueryPassConfig<kHeadDim>::kBytes,
                                  problem, stream, maps.qkv, operands, problem, scale);
  });
}

}  // namespace adamant::kernels::cuda::flash_attention_launchers
