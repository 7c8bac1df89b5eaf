// Query pass of the flash attention backward (flash_attention_backward_passes.h) on
// Hopper's warpgroup tensor cores (wgmma.cuh), for every head size: one block of two or
// three warpgroups (QueryPassConfig) per (sample, head, 128 or 192 queries), the longest
// rows first, each warpgroup owning 64 queries and their dq accumulators. Key and value tiles of 64
// rows stream through shared memory (tensor-memory copies of swizzled tiles,
// flash_attention_stages.cuh) up to the diagonal; per tile a warpgroup makes
//   s = q k^T and dp = d_out v^T   (q, d_out, k and v all read from shared memory),
//   p = exp2(s scale log2(e) - logsumexp log2(e)), ds = p (dp f - D),
//   dq += ds k                      (ds as a register operand),
// with f the dropout factor from the draws of kernels/attention_dropout_layout.h
// (attention_philox.cuh), each thread holding whole draws.
// dq is scaled by 1/sqrt(d) once at the end.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "adamant/kernels/cuda/attention_philox.cuh"
#include "adamant/kernels/cuda/flash_attention_backward_passes.h"
#include "adamant/kernels/cuda/flash_attention_block.cuh"
#include "adamant/kernels/cuda/flash_attention_dispatch.cuh"
#include "adamant/kernels/cuda/flash_attention_stages.cuh"
#include "adamant/kernels/cuda/flash_attention_tiles.cuh"
#include "adamant/kernels/cuda/wgmma.cuh"

namespace adamant::kernels::cuda::flash_attention_launchers {

namespace {

using namespace flash_detail;  // NOLINT(build/namespaces): the kernels' own helpers

// Without dropout, three warpgroups a block (192 queries) at head sizes 64 to 96: each key
// and value tile is read for half as many queries again, and the tensor cores have a third
// warpgroup's products while the others compute. With dropout, and at head size 128 (where
// 384 threads leave too few registers and ptxas serialises the products), two (128).
template <int kHeadDim, bool kDropout>
struct QueryPassConfig {
  static constexpr int kGroups = !kDropout && kHeadDim != 128 ? 3 : 2;
  static constexpr int kRows = kGroups * kGroupRows;  // the block's queries
  static constexpr int kMinBlocks = 1;
  static constexpr int kStages = 4;  // at least 3: tiles i and i - 1 in use, copies ahead
  static constexpr std::size_t kStreamTile = swizzled_tile_bytes<kHeadDim, kStreamRows>();
  static constexpr std::size_t kQueries = 0;  // the block's rows, then the dq staging
  static constexpr std::size_t kDOut = kQueries + swizzled_tile_bytes<kHeadDim, kRows>();
  static constexpr std::size_t kKeys = kDOut + swizzled_tile_bytes<kHeadDim, kRows>();
  static constexpr std::size_t kValues = kKeys + kStages * kStreamTile;
  static constexpr std::size_t kBytes = kValues + kStages * kStreamTile + kSwizzleAlignment;
};

template <int kHeadDim, bool kDropout>
__global__ void __launch_bounds__(block_threads<QueryPassConfig<kHeadDim, kDropout>::kRows>(),
                                  QueryPassConfig<kHeadDim, kDropout>::kMinBlocks)
    flash_backward_query_kernel(const __grid_constant__ BackwardMaps maps, BackwardOperands operands, Problem problem,
                                Dropout dropout, float scale, float scale_log2, float inverse_keep) {
  using Config = QueryPassConfig<kHeadDim, kDropout>;
  constexpr int kRows = Config::kRows;
  constexpr int kStages = Config::kStages;
  constexpr int kOutTiles = kHeadDim / 8;
  constexpr int kKeyTiles = kStreamRows / 8;  // n8 tiles of a 64-key step
  extern __shared__ unsigned char shared_raw[];
  __shared__ StageBarriers<kStages, block_warps<kRows>()> stages;
  unsigned char* shared = align_shared<kSwizzleAlignment>(shared_raw);
  unsigned char* query_tile = shared + Config::kQueries;
  unsigned char* d_out_tile = shared + Config::kDOut;
  unsigned char* key_tiles = shared + Config::kKeys;
  unsigned char* value_tiles = shared + Config::kValues;

  const BlockOrder order = launch_order();
  const BlockPlace<kHeadDim> place(problem, order.slot);
  const auto& [seq, sample, head, warp, lane, group, pair, channels, token_stride, sample_token] = place;
  const int first_query = first_row_longest_first<kRows>(order);
  const auto [warpgroup, group_first, group_last, group_active] = WarpgroupRows(warp, first_query, seq);
  const int warp_first = first_query + warp * kWarpRows;
  const int key_blocks = (min(first_query + kRows, seq) - 1) / kStreamRows + 1;

  // Thread 0 issues every copy (flash_attention_stages.cuh): the query and d_out tiles
  // once, then the key and value tiles through the stages.
  const bool copier = threadIdx.x == 0;
  const int q_column = head * kHeadDim;
  auto load_keys = [&](int block) {
    const int stage = block % kStages;
    copy_key_value_tiles_async<kHeadDim>(
        key_tiles + stage * Config::kStreamTile, value_tiles + stage * Config::kStreamTile, &maps.qkv,
        static_cast<int>(channels) + q_column, static_cast<int>(channels), block, sample,
        stages.reserve(block, static_cast<std::uint32_t>(2 * Config::kStreamTile)));
  };
  if (copier) stages.init();
  __syncthreads();
  if (copier) {
    std::uint64_t* landed =
        stages.reserve_block(static_cast<std::uint32_t>(2 * swizzled_tile_bytes<kHeadDim, kRows>()));
    copy_rows_async<kHeadDim, kRows>(query_tile, &maps.qkv, q_column, first_query, sample, landed);
    copy_rows_async<kHeadDim, kRows>(d_out_tile, &maps.d_out, q_column, first_query, sample, landed);
    for (int ahead = 0; ahead < kStages - 2 && ahead < key_blocks; ++ahead) load_keys(ahead);
  }

  // This thread's rows (group and group + 8 of the warp) and their statistics, made here
  // while the copies above are in flight, and left for the key pass.
  const int rows[2] = {warp_first + group, warp_first + group + 8};
  const RowStatistics<kHeadDim> statistics(place, operands, warp_first, inverse_keep);
  const float(&d_values)[2] = statistics.d_values;
  const float(&lse_log2)[2] = statistics.lse_log2;
  const attention_detail::DropoutMask mask(dropout, sample, head, seq);
  const std::uint32_t query_address = shared_address(query_tile);
  const std::uint32_t d_out_address = shared_address(d_out_tile);
  float dq[kOutTiles][4];
#pragma unroll
  for (int n = 0; n < kOutTiles; ++n) dq[n][0] = dq[n][1] = dq[n][2] = dq[n][3] = 0.0f;

  float s[kKeyTiles][4];
  float dp[kKeyTiles][4];
  // s and dp of one tile.
  auto issue_scores = [&](int block) {
    const std::size_t stage = static_cast<std::size_t>(block % kStages) * Config::kStreamTile;
    const std::uint32_t key_address = shared_address(key_tiles + stage);
    const std::uint32_t value_address = shared_address(value_tiles + stage);
    wgmma_fence();
    mma_rows_by_rows<kHeadDim, kRows>(s, query_address, warpgroup * kGroupRows, key_address);
    mma_rows_by_rows<kHeadDim, kRows>(dp, d_out_address, warpgroup * kGroupRows, value_address);
  };
  std::uint32_t d_scores[kKeyTiles / 2][4];
  // dq += ds k of one tile.
  auto issue_gradient = [&](int block) {
    const std::uint32_t key_address =
        shared_address(key_tiles + static_cast<std::size_t>(block % kStages) * Config::kStreamTile);
    wgmma_fence();
    mma_fragments_by_columns<kHeadDim, kStreamRows / 16, kStreamRows>(dq, d_scores, key_address);
  };

  // As in the key pass (flash_attention_backward_keys.cu): each tile issues its
  // s and dp and then the previous tile's dq product, which runs while the warpgroup
  // turns this tile's scores into score gradients.
  fence_accumulators(dq);  // set before any product is issued
#pragma unroll
  for (int kk = 0; kk < kKeyTiles / 2; ++kk) d_scores[kk][0] = d_scores[kk][1] = d_scores[kk][2] = d_scores[kk][3] = 0u;
  stages.wait_block();
  for (int block = 0; block < key_blocks; ++block) {
    const int first_key = block * kStreamRows;
    if (copier && block + kStages - 2 < key_blocks) load_keys(block + kStages - 2);
    __syncwarp();
    stages.wait_full(block);
    issue_scores(block);
    wgmma_commit();
    issue_gradient(block > 0 ? block - 1 : block);  // adds nothing on the first tile
    wgmma_commit();
    wgmma_wait<1>();  // this tile's scores; the previous tile's dq product may still run
    fence_accumulators(s);
    fence_accumulators(dp);
    // ds of this tile in place of dp; only a tile that reaches past the warp's first
    // query has keys after some of its queries and compares positions. The first
    // warpgroup gets zeros from the comparisons on the block's last tile (all its keys
    // come after its queries); a warpgroup past seq computes rows no one stores.
    auto to_gradients = [&](auto masked) {
      constexpr bool kMasked = decltype(masked)::value;
      static_assert(kKeyTiles % 4 == 0, "a draw decides four n8 tiles");
#pragma unroll
      for (int chunk = 0; chunk < kKeyTiles / 4; ++chunk) {
        // The draw decides rows {group, group + 8} x keys {32 chunk + 8 t + 2 pair + j}:
        // element e = 2 h + j of n8 tile 4 chunk + t (attention_dropout_layout.h).
        float factors[4][4] = {
            {1.0f, 1.0f, 1.0f, 1.0f}, {1.0f, 1.0f, 1.0f, 1.0f}, {1.0f, 1.0f, 1.0f, 1.0f}, {1.0f, 1.0f, 1.0f, 1.0f}};
        if constexpr (kDropout) {
          mask.row_factors(mask.draw(warp_first / 16, first_key / 32 + chunk, group, pair), factors);
        }
#pragma unroll
        for (int t = 0; t < 4; ++t) {
          const int tile = 4 * chunk + t;
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int h = e >> 1;
            float p = fast_exp2(fmaf(s[tile][e], scale_log2, -lse_log2[h]));
            if constexpr (kMasked) {
              if (first_key + 8 * tile + 2 * pair + (e & 1) > rows[h]) p = 0.0f;
            }
            dp[tile][e] = p * (dp[tile][e] * factors[t][e] - d_values[h]);
          }
        }
      }
    };
    with_masking(first_key + kStreamRows - 1 > warp_first, to_gradients);
    wgmma_wait<0>();  // the previous tile's dq product: its operands and its stage are free
    if (block > 0) stages.release(block - 1, lane);
#pragma unroll
    for (int kk = 0; kk < kKeyTiles / 2; ++kk) a_from_c(d_scores[kk], dp[2 * kk], dp[2 * kk + 1]);
  }
  issue_gradient(key_blocks - 1);
  wgmma_commit();
  wgmma_wait<0>();
  fence_accumulators(dq);
  if (!group_active) return;

  // The warp's own query rows are read only by its warpgroup's products, all done: they stage dq.
  store_warp_rows_swizzled<kHeadDim, kRows>(
      dq, scale, scale, query_tile, warp * kWarpRows, operands.d_qkv + sample_token * token_stride + head * kHeadDim,
      token_stride, warp_first, seq, place.bias_partials(operands.bias_partials, 0, warp_first));
}

}  // namespace

cudaError_t launch_backward_query_pass(const BackwardMaps& maps, const BackwardOperands& operands,
                                       const Problem& problem, const Dropout& dropout, cudaStream_t stream) {
  return with_supported_head_dim_and_dropout(problem.head_dim, dropout.enabled, [&](auto head, auto with_dropout) {
    constexpr int kHeadDim = decltype(head)::value;
    constexpr bool kDropout = decltype(with_dropout)::value;
    const float scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
    using Config = QueryPassConfig<kHeadDim, kDropout>;
    return launch_over_row_blocks<Config::kRows>(flash_backward_query_kernel<kHeadDim, kDropout>, Config::kBytes,
                                                 problem, stream, maps, operands, problem, dropout, scale,
                                                 kLog2E * scale, inverse_keep_scale(dropout));
  });
}

}  // namespace adamant::kernels::cuda::flash_attention_launchers
