// Key pass of the flash attention backward (flash_attention_backward_passes.h) on
// Hopper's warpgroup tensor cores (wgmma.cuh), for every head size: one block of
// two warpgroups per (sample, head, 128 keys), each warpgroup owning 64 keys and their
// dk and dv accumulators. Query, d_out and row-statistics tiles of 64 queries stream
// through shared memory (tensor-memory copies of swizzled tiles,
// flash_attention_stages.cuh) from the diagonal to the end of the sequence; per tile a
// warpgroup makes
//   s^T = k q^T and dp^T = v d_out^T   (k, v, q and d_out all read from shared memory),
//   p^T = exp2(s^T scale log2(e) - logsumexp log2(e)), ds^T = p^T (dp^T f - D),
//   dv += (p^T f) d_out, dk += ds^T q  (p^T and ds^T as register operands),
// with f the dropout factor from the draws of kernels/attention_dropout_layout.h
// (attention_philox.cuh): two neighbouring lanes share two draws, and the two warps of a
// 32-key pair need the same draws. At head size 64 a third warpgroup (the drawers, 24
// registers a thread, setmaxnreg) makes them into two shared-memory stages while the
// product warpgroups wait on their products and exponentials; at the other head sizes,
// whose products need every register, the two warps of a pair each make every other
// step's draws and hand each other the words.
// dk is scaled by 1/sqrt(d) once at the end. With dropout, f = m / (1 - p) for the mask m,
// and the products take m p^T and ds^T (1 - p) = (m p^T) dp^T - p^T D (1 - p) (the row
// statistics carry D (1 - p)): the 1/(1-p) multiplies dk and dv once at the end, and the
// query pass's dq from the stored ds^T (1 - p). One thread copies every tile with
// tensor-memory copies (tensor_copy.cuh) onto the stages' barriers; the warps wait for
// their tiles and release each stage once their products on it are done.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "adamant/kernels/cuda/attention_philox.cuh"
#include "adamant/kernels/cuda/flash_attention_backward_passes.h"
#include "adamant/kernels/cuda/flash_attention_block.cuh"
#include "adamant/kernels/cuda/flash_attention_dispatch.cuh"
#include "adamant/kernels/cuda/flash_attention_drawers.cuh"
#include "adamant/kernels/cuda/flash_attention_stages.cuh"
#include "adamant/kernels/cuda/flash_attention_stored_scores.cuh"
#include "adamant/kernels/cuda/flash_attention_tiles.cuh"
#include "adamant/kernels/cuda/wgmma.cuh"

namespace adamant::kernels::cuda::flash_attention_launchers {

namespace {

using namespace flash_detail;  // NOLINT(build/namespaces): the kernels' own helpers

template <int kHeadDim, bool kDropout>
struct KeyPassConfig {
  static constexpr int kMinBlocks = 1;
  // Overlapping one tile's gradient products with the next tile's probabilities holds
  // both tiles' operands: registers enough at head size 64 only.
  static constexpr bool kOverlap = kHeadDim == 64;
  // With dropout, a third warpgroup makes the mask's draws into shared memory, in the issue
  // slots the two product warpgroups leave empty while they wait on their products and
  // exponentials: at head size 64 only, whose products fit in 240 registers a thread.
  static constexpr bool kDrawers = kDropout && kHeadDim == 64;
  static constexpr int kBlockThreads = kThreads + (kDrawers ? kGroupRows * 2 : 0);
  // The launch bounds make 168 registers a thread for 384 threads: the product warpgroups'
  // 240 come from what the drawers give back, so the drawers keep 24 (flash_attention_drawers.cuh).
  static constexpr int kDrawerRegisters = 24;
  static constexpr int kProductRegisters = 240;
  static_assert(!kDrawers || registers_fit(kBlockThreads, kMinBlocks, kThreads, kProductRegisters, kDrawerRegisters),
                "the product warpgroups' registers come from the drawers' within the block's allocation");
  static constexpr int kStages = 4;  // at least 3: tiles i and i - 1 in use, copies ahead
  static constexpr std::size_t kStreamTile = swizzled_tile_bytes<kHeadDim, kStreamRows>();
  static constexpr std::size_t kKeys = 0;  // 128 rows; each warp's own rows stage its dk at the end
  static constexpr std::size_t kValues = kKeys + swizzled_tile_bytes<kHeadDim, kBlockRows>();  // and its dv
  static constexpr std::size_t kQueries = kValues + swizzled_tile_bytes<kHeadDim, kBlockRows>();
  static constexpr std::size_t kDOut = kQueries + kStages * kStreamTile;
  // Stages of the rows' statistics records (D, lse log2 e, D (1 - p), 0): a copy's rows are 16 bytes.
  static constexpr std::size_t kStatisticsTile = kStreamRows * kStatisticsRow * sizeof(float);
  static constexpr std::size_t kStatistics = kDOut + kStages * kStreamTile;
  // With stored scores, each warpgroup stages its ds^T images here: two buffers where
  // there is room, so that a tile's image waits for the copy of the tile before last.
  static constexpr std::size_t kStaging = kStatistics + kStages * kStatisticsTile;
  static constexpr int kStagingBuffers = kHeadDim < 128 ? 2 : 1;
  // With dropout, the words of the draws: without drawers, those each warp makes for the
  // other warp of its pair, two tiles' (double-buffered) of every other 16-query step, 8
  // bytes a lane; with them, every product warp's words of every step, kDrawStages tiles.
  static constexpr int kDrawSteps = kStreamRows / 16;  // 16-query steps of a tile
  static constexpr int kDrawStages = 2;
  static constexpr std::size_t kDrawTileBytes = kWarps * kDrawSteps * kWarpSize * sizeof(uint2);
  static constexpr std::size_t kDrawExchangeBytes =
      kDrawers ? kDrawStages * kDrawTileBytes
               : (kThreads / kWarpSize) * 2 * (kDrawSteps / 2) * kWarpSize * sizeof(uint2);
  static constexpr std::size_t draw_exchange(bool store_scores) {
    return kStaging + (store_scores ? kStagingBuffers * 2 * kScoreTileBytes : 0);
  }
  static constexpr std::size_t bytes(bool store_scores) {
    return draw_exchange(store_scores) + (kDropout ? kDrawExchangeBytes : 0) + kSwizzleAlignment;
  }
  static_assert(bytes(true) <= 227 * 1024, "a Hopper block holds at most 227 KiB of shared memory");
};

// Waits until both warps of warp pair `pair` (64 threads) have arrived; named barrier 1 + pair.
__device__ __forceinline__ void warp_pair_barrier(int pair) {
  asm volatile("bar.sync %0, 64;" ::"r"(1 + pair) : "memory");
}

template <int kHeadDim, bool kDropout, bool kStoreScores>
__global__ void __launch_bounds__(KeyPassConfig<kHeadDim, kDropout>::kBlockThreads,
                                  KeyPassConfig<kHeadDim, kDropout>::kMinBlocks)
    flash_backward_key_kernel(const __grid_constant__ BackwardMaps maps, BackwardOperands operands, Problem problem,
                              Dropout dropout, float scale, float scale_log2) {
  using Config = KeyPassConfig<kHeadDim, kDropout>;
  constexpr int kStages = Config::kStages;
  constexpr int kOutTiles = kHeadDim / 8;
  constexpr int kQueryTiles = kStreamRows / 8;  // n8 tiles of a 64-query step
  extern __shared__ unsigned char shared_raw[];
  __shared__ StageBarriers<kStages> stages;
  constexpr int kDrawStages = Config::kDrawStages;
  [[maybe_unused]] __shared__ DrawBarriers<kDrawStages, Config::kBlockThreads - kThreads, kWarps> draws;
  unsigned char* shared = align_shared<kSwizzleAlignment>(shared_raw);
  unsigned char* key_tile = shared + Config::kKeys;
  unsigned char* value_tile = shared + Config::kValues;
  unsigned char* query_tiles = shared + Config::kQueries;
  unsigned char* d_out_tiles = shared + Config::kDOut;
  auto* statistics = reinterpret_cast<float*>(shared + Config::kStatistics);

  const BlockOrder order = kStoreScores ? head_grouped_order() : launch_order();  // flash_attention_block.cuh
  const BlockPlace<kHeadDim> place(problem, order.slot);
  const auto& [seq, sample, head, warp, lane, group, pair, channels, token_stride, sample_token] = place;
  const int first_key = order.heaviest * kBlockRows;  // the first keys see the most queries
  const auto [warpgroup, group_first, group_last, group_active] = WarpgroupRows(warp, first_key, seq);
  const int warp_first = first_key + warp * kWarpRows;
  const int first_query_block = first_key / kStreamRows;
  const int query_blocks = (seq + kStreamRows - 1) / kStreamRows;

  // Thread 0 issues every copy (flash_attention_stages.cuh): the block's keys and values
  // once, then each query tile's q, d_out and statistics through the stages, tile i of
  // the block's run being query tile first_query_block + i.
  const bool copier = threadIdx.x == 0;
  const int q_column = head * kHeadDim;
  auto tile_of = [&](int block) { return block - first_query_block; };
  auto load_query_block = [&](int block) {
    const int stage = tile_of(block) % kStages;
    std::uint64_t* full =
        stages.reserve(tile_of(block), static_cast<std::uint32_t>(2 * Config::kStreamTile + Config::kStatisticsTile));
    const int first = block * kStreamRows;
    copy_rows_async<kHeadDim, kStreamRows>(query_tiles + stage * Config::kStreamTile, &maps.qkv, q_column, first,
                                           sample, full);
    copy_rows_async<kHeadDim, kStreamRows>(d_out_tiles + stage * Config::kStreamTile, &maps.d_out, q_column, first,
                                           sample, full);
    detail::copy_box_async(reinterpret_cast<unsigned char*>(statistics + stage * kStatisticsRow * kStreamRows),
                           &maps.statistics, head * kStatisticsRow, first, sample, full);
  };
  constexpr int kDrawSteps = Config::kDrawSteps;
  if (copier) {
    if constexpr (Config::kDrawers) draws.init();
    stages.init();  // and the fence that publishes every barrier's initialisation
  }
  __syncthreads();
  // The draws' words of product warp w, step i of stage s: words + ((s kWarps + w) kDrawSteps + i) kWarpSize + lane.
  [[maybe_unused]] auto* words = reinterpret_cast<uint2*>(shared + Config::draw_exchange(kStoreScores));
  if constexpr (Config::kDrawers) {
    if (warp >= kWarps) {
      // Drawer warp k makes, for every tile, the draws of the block's keys 32 k to 32 k + 31 (product
      // warps 2 k and 2 k + 1, which need the same draws: attention_dropout_layout.h) at each of its
      // 16-query steps, and hands each warp its words (the first two for the first warp's keys).
      release_registers<Config::kDrawerRegisters>();
      const attention_detail::DropoutMask drawer_mask(dropout, sample, head, seq);
      const int key_pair = warp - kWarps;
      for (int block = first_query_block; block < query_blocks; ++block) {
        const int tile = block - first_query_block;
        const int stage = draws.acquire(tile);
        uint2* first_warp = words + ((stage * kWarps + 2 * key_pair) * kDrawSteps) * kWarpSize + lane;
#pragma unroll
        for (int step = 0; step < kDrawSteps; ++step) {
          const uint4 draw =
              drawer_mask.key_draw(block * kStreamRows / 16 + step, first_key / 32 + key_pair, group, pair);
          first_warp[step * kWarpSize] = make_uint2(draw.x, draw.y);
          first_warp[(kDrawSteps + step) * kWarpSize] = make_uint2(draw.z, draw.w);
        }
        draws.publish(tile);
      }
      return;
    }
    take_registers<Config::kProductRegisters>();
  }
  if (copier) {
    std::uint64_t* keys_landed =
        stages.reserve_block(static_cast<std::uint32_t>(2 * swizzled_tile_bytes<kHeadDim, kBlockRows>()));
    const int k_column = static_cast<int>(channels) + q_column;
    copy_rows_async<kHeadDim, kBlockRows>(key_tile, &maps.qkv, k_column, first_key, sample, keys_landed);
    copy_rows_async<kHeadDim, kBlockRows>(value_tile, &maps.qkv, k_column + static_cast<int>(channels), first_key,
                                          sample, keys_landed);
    for (int ahead = 0; ahead < kStages - 2 && first_query_block + ahead < query_blocks; ++ahead) {
      load_query_block(first_query_block + ahead);
    }
  }

  float dk[kOutTiles][4];
  float dv[kOutTiles][4];
#pragma unroll
  for (int n = 0; n < kOutTiles; ++n) {
#pragma unroll
    for (int e = 0; e < 4; ++e) dk[n][e] = dv[n][e] = 0.0f;
  }
  const int keys[2] = {warp_first + group, warp_first + group + 8};
  const attention_detail::DropoutMask mask(dropout, sample, head, seq);
  const std::uint32_t key_address = shared_address(key_tile);
  const std::uint32_t value_address = shared_address(value_tile);

  // With dropout and without drawers, the two warps of a pair (the block's keys 32 b to
  // 32 b + 31) need the same draws, each the words of its own 16 keys: each makes every other
  // 16-query step's draws and hands its partner the partner's words through shared memory, so
  // that a draw is made once.
  static_assert(kDrawSteps % 2 == 0, "the warps of a pair make every other step's draws");
  [[maybe_unused]] const int key_half = warp & 1;
  [[maybe_unused]] auto exchange_slot = [&](int writer, int tile_parity, int i) {
    return words + ((writer * 2 + tile_parity) * (kDrawSteps / 2) + i) * kWarpSize + lane;
  };

  float s[kQueryTiles][4];
  float dp[kQueryTiles][4];
  // s^T and dp^T of one tile.
  auto issue_scores = [&](int block) {
    const int stage = tile_of(block) % kStages;
    const std::uint32_t query_address = shared_address(query_tiles + stage * Config::kStreamTile);
    const std::uint32_t d_out_address = shared_address(d_out_tiles + stage * Config::kStreamTile);
    wgmma_fence();
    mma_rows_by_rows<kHeadDim, kBlockRows>(s, key_address, warpgroup * kGroupRows, query_address);
    mma_rows_by_rows<kHeadDim, kBlockRows>(dp, value_address, warpgroup * kGroupRows, d_out_address);
  };
  std::uint32_t probs[kQueryTiles / 2][4];
  std::uint32_t d_scores[kQueryTiles / 2][4];
  // dv += p^T d_out and dk += ds^T q of one tile.
  auto issue_gradients = [&](int block) {
    const int stage = tile_of(block) % kStages;
    const std::uint32_t query_address = shared_address(query_tiles + stage * Config::kStreamTile);
    const std::uint32_t d_out_address = shared_address(d_out_tiles + stage * Config::kStreamTile);
    wgmma_fence();
    mma_fragments_by_columns<kHeadDim, kStreamRows / 16, kStreamRows>(dv, probs, d_out_address);
    mma_fragments_by_columns<kHeadDim, kStreamRows / 16, kStreamRows>(dk, d_scores, query_address);
  };

  // Each tile issues its s^T and dp^T and then the previous tile's gradient products,
  // which with kOverlap run while the warpgroup turns this tile's scores into
  // probabilities and score gradients (see the forward, flash_attention_forward.cu:
  // both products on every path, zero operands where there is nothing to add). Tile
  // i's copies start when tile i - kStages's products are done in every warp,
  // kStages - 2 tiles ahead.
  fence_accumulators(dk);  // set before any product is issued
  fence_accumulators(dv);
#pragma unroll
  for (int kk = 0; kk < kQueryTiles / 2; ++kk) {
#pragma unroll
    for (int r = 0; r < 4; ++r) probs[kk][r] = d_scores[kk][r] = 0u;
  }
  // The thread that stores its warp's rows of the images, and the staging buffer of a tile.
  const bool stores_images = kStoreScores && lane == 0;
  auto staging_of = [&](int block) {
    const int buffer = (block - first_query_block) % Config::kStagingBuffers;
    return shared + Config::kStaging + (buffer * 2 + warpgroup) * kScoreTileBytes;
  };
  stages.wait_block();
  for (int block = first_query_block; block < query_blocks; ++block) {
    const int block_first = block * kStreamRows;
    // This tile's staging buffer is free once the copy that last used it has read it;
    // the warp's own rows are all it stages.
    if (stores_images) detail::wait_stores_read<Config::kStagingBuffers - 1>();
    if (copier && block + kStages - 2 < query_blocks) load_query_block(block + kStages - 2);
    __syncwarp();
    stages.wait_full(tile_of(block));
    issue_scores(block);
    wgmma_commit();
    if constexpr (Config::kOverlap) {
      issue_gradients(block > first_query_block ? block - 1 : block);  // adds nothing on the first tile
      wgmma_commit();
      wgmma_wait<1>();  // this tile's scores; the previous tile's gradients may still run
    } else {
      wgmma_wait<0>();
    }
    fence_accumulators(s);
    fence_accumulators(dp);
    // This warp's draws of the tile: its own words of steps 2 i + key_half, and its partner's
    // into the exchange.
    [[maybe_unused]] const int tile_parity = tile_of(block) & 1;
    [[maybe_unused]] uint2 own_words[kDrawSteps / 2];
    [[maybe_unused]] uint2 step_words[kDrawSteps];
    if constexpr (Config::kDrawers) {
      // The drawers' words of this warp's keys, every step of the tile.
      const int stage = draws.wait(tile_of(block));
      const uint2* mine = words + ((stage * kWarps + warp) * kDrawSteps) * kWarpSize + lane;
#pragma unroll
      for (int step = 0; step < kDrawSteps; ++step) step_words[step] = mine[step * kWarpSize];
      draws.release(tile_of(block), lane);
    } else if constexpr (kDropout) {
#pragma unroll
      for (int i = 0; i < kDrawSteps / 2; ++i) {
        const uint4 words = mask.key_draw(block_first / 16 + 2 * i + key_half, warp_first / 32, group, pair);
        own_words[i] = key_half != 0 ? make_uint2(words.z, words.w) : make_uint2(words.x, words.y);
        *exchange_slot(warp, tile_parity, i) =
            key_half != 0 ? make_uint2(words.x, words.y) : make_uint2(words.z, words.w);
      }
      warp_pair_barrier(warp / 2);
    }
    // p^T and ds^T of this tile in place of s^T and dp^T; only the diagonal tile (queries
    // before some of the warp's keys) and the last (queries past seq) compare positions.
    // A warpgroup whose keys all come after the tile's queries (the second one on the
    // block's first tile, or one past seq) gets zeros from the comparisons, so every
    // warpgroup takes the same path on every tile.
    auto to_gradients = [&](auto masked) {
      constexpr bool kMasked = decltype(masked)::value;
      const float* stage_statistics = statistics + (tile_of(block) % kStages) * kStatisticsRow * kStreamRows;
#pragma unroll
      for (int chunk = 0; chunk < kQueryTiles / 2; ++chunk) {
        // Queries {block_first + 16 chunk + 8 t + 2 pair + j} x this thread's two keys,
        // element e = 2 h + j of n8 tile 2 chunk + t, from two draws shared with the
        // neighbouring lane (attention_dropout_layout.h).
        [[maybe_unused]] std::uint32_t tile_words[2] = {};
        if constexpr (kDropout) {
          uint2 key_words;
          if constexpr (Config::kDrawers) {
            key_words = step_words[chunk];
          } else {
            key_words = own_words[chunk / 2];
            if ((chunk & 1) != key_half) key_words = *exchange_slot(warp ^ 1, tile_parity, chunk / 2);
          }
          mask.column_words(key_words, group, tile_words);
        }
#pragma unroll
        for (int t = 0; t < 2; ++t) {
          const int tile = 2 * chunk + t;
          // (D, lse log2 e, D (1 - p)) of queries 2 pair and 2 pair + 1 of this n8 tile.
          const float* row = stage_statistics + kStatisticsRow * (8 * tile + 2 * pair);
          const float4 first_stats = *reinterpret_cast<const float4*>(row);
          const float4 second_stats = *reinterpret_cast<const float4*>(row + kStatisticsRow);
          const float d_values[2] = {kDropout ? first_stats.z : first_stats.x,
                                     kDropout ? second_stats.z : second_stats.x};
          const float lse_log2[2] = {first_stats.y, second_stats.y};
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            float p = fast_exp2(fmaf(s[tile][e], scale_log2, -lse_log2[e & 1]));
            if constexpr (kMasked) {
              const int query = block_first + 8 * tile + 2 * pair + (e & 1);
              if (query < keys[e >> 1] || query >= seq) p = 0.0f;
            }
            if constexpr (kDropout) {
              const float kept = mask.kept(tile_words[t], static_cast<unsigned>(e)) ? p : 0.0f;
              dp[tile][e] = fmaf(kept, dp[tile][e], -p * d_values[e & 1]);
              s[tile][e] = kept;
            } else {
              s[tile][e] = p;
              dp[tile][e] = p * (dp[tile][e] - d_values[e & 1]);
            }
          }
        }
      }
    };
    with_masking(block_first < warp_first + kWarpRows - 1 || block_first + kStreamRows > seq, to_gradients);
    if constexpr (Config::kOverlap) {
      wgmma_wait<0>();  // the previous tile's gradients: their operands and its stage are free
      if (block > first_query_block) stages.release(tile_of(block - 1), lane);
    }
#pragma unroll
    for (int kk = 0; kk < kQueryTiles / 2; ++kk) {
      a_from_c(probs[kk], s[2 * kk], s[2 * kk + 1]);
      a_from_c(d_scores[kk], dp[2 * kk], dp[2 * kk + 1]);
    }
    if constexpr (kStoreScores) {
      // This warpgroup's ds^T tile for the query pass (flash_attention_stored_scores.cuh):
      // register a[r] of k16 step kk holds keys row (r odd: + 8), queries 16 kk + 8 (r / 2)
      // + 2 pair + {0, 1}: matrix r of one stmatrix, whose rows (16 bytes of a swizzled
      // row each) lanes 8 r .. 8 r + 7 name. Each warp's 16 rows are 2 KB of the image in a
      // row, so a warp stages them in the tile's staging buffer, publishes them to the
      // async proxy and copies them out by itself, with no barrier across the warpgroup.
      const int key_tile = first_key / kStreamRows + warpgroup;
      if (block >= key_tile) {
        unsigned char* staging = staging_of(block);
        const int lane_row = (warp % 4) * kWarpRows + ((lane >> 3) & 1) * 8 + (lane & 7);
        const std::uint32_t staging_address = shared_address(staging);
#pragma unroll
        for (int kk = 0; kk < kQueryTiles / 2; ++kk) {
          store_matrices(d_scores[kk], staging_address + swizzled_chunk_offset<kStreamRows, kStreamRows>(
                                                             lane_row, 2 * kk + (lane >> 4)));
        }
        detail::fence_async_shared();
        __syncwarp();
        if (stores_images) {
          constexpr std::uint32_t kWarpImageBytes = kWarpRows * Panels<kStreamRows>::kRowBytes;
          const std::uint32_t warp_offset = static_cast<std::uint32_t>(warp % 4) * kWarpImageBytes;
          // The images are read once, by the query pass: marked to leave L2 first.
          detail::store_bytes_async<kWarpImageBytes>(reinterpret_cast<unsigned char*>(operands.d_scores) +
                                                         score_tile_offset(order.slot, seq, key_tile, block) +
                                                         warp_offset,
                                                     staging_address + warp_offset, detail::evict_first_policy());
          detail::commit_stores();
        }
      }
    }
    if constexpr (!Config::kOverlap) {
      issue_gradients(block);
      wgmma_commit();
      wgmma_wait<0>();
      stages.release(tile_of(block), lane);
    }
  }
  if constexpr (Config::kOverlap) {
    issue_gradients(query_blocks - 1);
    wgmma_commit();
  }
  wgmma_wait<0>();
  fence_accumulators(dv);
  fence_accumulators(dk);
  if (stores_images) detail::wait_stores_done();
  if (!group_active) return;

  // The warp's own key and value rows are read only by its warpgroup's products, all
  // done: they stage its results.
  std::uint16_t* dk_base = operands.d_qkv + sample_token * token_stride + channels + head * kHeadDim;
  const float kept_scale = kDropout ? mask.keep_scale() : 1.0f;
  store_warp_rows_swizzled<kHeadDim, kBlockRows>(dk, scale * kept_scale, scale * kept_scale, key_tile, warp * kWarpRows,
                                                 dk_base, token_stride, warp_first, seq,
                                                 place.bias_partials(operands.bias_partials, 1, warp_first));
  store_warp_rows_swizzled<kHeadDim, kBlockRows>(dv, kept_scale, kept_scale, value_tile, warp * kWarpRows,
                                                 dk_base + channels, token_stride, warp_first, seq,
                                                 place.bias_partials(operands.bias_partials, 2, warp_first));
}

}  // namespace

cudaError_t launch_backward_key_pass(const BackwardMaps& maps, const BackwardOperands& operands, const Problem& problem,
                                     const Dropout& dropout, cudaStream_t stream) {
  return with_supported_head_dim_and_dropout(problem.head_dim, dropout.enabled, [&](auto head, auto with_dropout) {
    constexpr int kHeadDim = decltype(head)::value;
    constexpr bool kDropout = decltype(with_dropout)::value;
    using Config = KeyPassConfig<kHeadDim, kDropout>;
    const float scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
    if (operands.d_scores != nullptr) {
      return launch_over_row_blocks<kBlockRows, Config::kBlockThreads>(
          flash_backward_key_kernel<kHeadDim, kDropout, true>, Config::bytes(true), problem, stream, maps, operands,
          problem, dropout, scale, kLog2E * scale);
    }
    return launch_over_row_blocks<kBlockRows, Config::kBlockThreads>(
        flash_backward_key_kernel<kHeadDim, kDropout, false>, Config::bytes(false), problem, stream, maps, operands,
        problem, dropout, scale, kLog2E * scale);
  });
}

}  // namespace adamant::kernels::cuda::flash_attention_launchers
