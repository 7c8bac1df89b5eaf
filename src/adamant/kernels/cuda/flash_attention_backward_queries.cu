// Query pass of the flash attention backward (flash_attention_backward_passes.h):
// one block of 8 warps per (sample, head, 128 queries), the longest rows first,
// each warp owning 16 queries whose q and d_out fragments and dq accumulators stay
// in registers. Key and value tiles of 64 rows stream through shared memory
// (a cp.async pipeline) up to the diagonal; a warp takes them 16 keys at a time:
//   s = q k^T, dp = d_out v^T, p = exp2(s scale log2(e) - logsumexp log2(e)),
//   ds = p (dp f - D), dq += ds k (k through transposed ldmatrix),
// with f the dropout factor; dq is scaled by 1/sqrt(d) once at the end.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "adamant/kernels/cuda/attention_philox.cuh"
#include "adamant/kernels/cuda/flash_attention_backward_passes.h"
#include "adamant/kernels/cuda/flash_attention_block.cuh"
#include "adamant/kernels/cuda/flash_attention_dispatch.cuh"
#include "adamant/kernels/cuda/flash_attention_tiles.cuh"

namespace adamant::kernels::cuda::flash_attention_launchers {

namespace {

using namespace flash_detail;  // NOLINT(build/namespaces): the kernels' own helpers

template <int kHeadDim, bool kDropout>
struct QueryPassConfig {
  // At head_dim 80 without dropout, two blocks share a multiprocessor (128 registers a
  // thread; measured faster than one block with all it needs); the others get one
  // block and the registers they need.
  static constexpr int kMinBlocks = kHeadDim <= 80 && !kDropout ? 2 : 1;
  // At head_dim 80 two blocks with three stages would leave almost no L1 cache for
  // the spilled registers; two stages were measured faster there.
  static constexpr int kStages = kHeadDim == 80 && !kDropout ? 2 : 3;
  static constexpr std::size_t kQueries = 0;  // 128 rows, read once into fragments, then the dq staging
  static constexpr std::size_t kDOut = kQueries + tile_bytes<kHeadDim>(kBlockRows);            // 128 rows, read once
  static constexpr std::size_t kKeys = kDOut + tile_bytes<kHeadDim>(kBlockRows);               // stages of 64 rows
  static constexpr std::size_t kValues = kKeys + kStages * tile_bytes<kHeadDim>(kStreamRows);  // stages of 64 rows
  static constexpr std::size_t kBytes = kValues + kStages * tile_bytes<kHeadDim>(kStreamRows);
};

template <int kHeadDim, bool kDropout>
__global__ void __launch_bounds__(kThreads, QueryPassConfig<kHeadDim, kDropout>::kMinBlocks)
    flash_backward_query_kernel(BackwardOperands operands, Problem problem, Dropout dropout, float scale,
                                float scale_log2) {
  using Config = QueryPassConfig<kHeadDim, kDropout>;
  constexpr int kStages = Config::kStages;
  constexpr int kSlices = kHeadDim / 16;
  constexpr int kOutTiles = kHeadDim / 8;
  constexpr int kChunks = kStreamRows / 16;  // 16-key steps per streamed tile
  constexpr std::uint32_t kStreamTileBytes = tile_bytes<kHeadDim>(kStreamRows);
  extern __shared__ __align__(128) unsigned char shared[];
  auto* query_tile = reinterpret_cast<std::uint16_t*>(shared + Config::kQueries);
  auto* d_out_tile = reinterpret_cast<std::uint16_t*>(shared + Config::kDOut);
  auto* key_tiles = reinterpret_cast<std::uint16_t*>(shared + Config::kKeys);
  auto* value_tiles = reinterpret_cast<std::uint16_t*>(shared + Config::kValues);

  const BlockPlace<kHeadDim> place(problem);
  const auto& [seq, sample, head, warp, lane, group, pair, channels, token_stride, sample_token] = place;
  const int first_query = first_row_longest_first();
  const int warp_first = first_query + warp * kWarpRows;
  const int warp_last = warp_first + kWarpRows - 1;
  const bool warp_active = warp_first < seq;
  const int key_blocks = (min(first_query + kBlockRows, seq) - 1) / kStreamRows + 1;

  const std::uint16_t* q_base = place.q(operands.qkv);
  const std::uint16_t* k_base = q_base + channels;
  const std::uint16_t* v_base = q_base + 2 * channels;
  const std::uint16_t* d_out_base = place.rows_of(operands.d_out);

  auto load_keys = [&](int block) {
    const int stage = block % kStages;
    load_tile_async<kHeadDim, kStreamRows>(key_tiles + stage * kStreamRows * kPitch<kHeadDim>, k_base, token_stride,
                                           block * kStreamRows, seq);
    load_tile_async<kHeadDim, kStreamRows>(value_tiles + stage * kStreamRows * kPitch<kHeadDim>, v_base, token_stride,
                                           block * kStreamRows, seq);
  };
  load_tile_async<kHeadDim, kBlockRows>(query_tile, q_base, token_stride, first_query, seq);
  load_tile_async<kHeadDim, kBlockRows>(d_out_tile, d_out_base, channels, first_query, seq);
  load_keys(0);
  commit_copies();
#pragma unroll
  for (int ahead = 1; ahead < kStages - 1; ++ahead) {
    if (0 + ahead < key_blocks) load_keys(0 + ahead);
    commit_copies();
  }

  // This thread's rows (group and group + 8 of the warp): their statistics are read
  // here, before this block (their only writer) stores dq over them.
  const int rows[2] = {warp_first + group, warp_first + group + 8};
  const RowStatistics<kHeadDim> statistics(place, operands.d_qkv, warp_first);
  const float(&d_values)[2] = statistics.d_values;
  const float(&lse_log2)[2] = statistics.lse_log2;
  const attention_detail::DropoutMask mask(dropout, sample, head, seq);

  const std::uint32_t a_lane = a_pattern<kHeadDim>(lane);
  const std::uint32_t b_lane = b_pattern<kHeadDim>(lane);
  const std::uint32_t warp_rows = tile_offset<kHeadDim>(warp * kWarpRows, 0) + a_lane;
  std::uint32_t q_frags[kSlices][4];
  std::uint32_t d_out_frags[kSlices][4];
  float dq[kOutTiles][4];
#pragma unroll
  for (int n = 0; n < kOutTiles; ++n) dq[n][0] = dq[n][1] = dq[n][2] = dq[n][3] = 0.0f;

  for (int block = 0; block < key_blocks; ++block) {
    wait_copies<kStages - 2>();  // this block's copies have landed; later blocks' may be in flight
    __syncthreads();
    if (block + kStages - 1 < key_blocks) load_keys(block + kStages - 1);
    commit_copies();
    const int stage = block % kStages;

    const int first_key = block * kStreamRows;
    if (warp_active && first_key <= warp_last) {
      if (block == 0) {
#pragma unroll
        for (int kk = 0; kk < kSlices; ++kk) {
          load_matrices(q_frags[kk], shared_address(query_tile) + warp_rows + tile_offset<kHeadDim>(0, 16 * kk));
          load_matrices(d_out_frags[kk], shared_address(d_out_tile) + warp_rows + tile_offset<kHeadDim>(0, 16 * kk));
        }
      }
      const std::uint32_t key_address = shared_address(key_tiles) + stage * kStreamTileBytes;
      const std::uint32_t value_address = shared_address(value_tiles) + stage * kStreamTileBytes;
      // One 16-key step. An edge step may have keys after some of the warp's
      // queries; interior steps skip those checks, so that a block of them is
      // straight-line code the compiler can interleave.
      auto step = [&](int chunk, auto edge) {
        constexpr bool kEdge = decltype(edge)::value;
        const int chunk_first = first_key + 16 * chunk;
        if constexpr (kEdge) {
          if (chunk_first > warp_last) return;  // every key after every query of the warp
        }
        float s[2][4] = {};
        float dp[2][4] = {};
#pragma unroll
        for (int kk = 0; kk < kSlices; ++kk) {
          std::uint32_t b[4];
          load_matrices(b, key_address + b_lane + tile_offset<kHeadDim>(16 * chunk, 16 * kk));
          mma_pair(s[0], s[1], q_frags[kk], b);
          load_matrices(b, value_address + b_lane + tile_offset<kHeadDim>(16 * chunk, 16 * kk));
          mma_pair(dp[0], dp[1], d_out_frags[kk], b);
        }
        const bool needs_mask = kEdge && chunk_first + 15 > warp_first;
        // The draw decides rows {group, group + 8} x keys {chunk_first + 2 pair + j, + 8}:
        // element e = 2 h + j of n8 tiles 0 and 1 (attention_dropout_layout.h).
        float factors[2][4] = {{1.0f, 1.0f, 1.0f, 1.0f}, {1.0f, 1.0f, 1.0f, 1.0f}};
        if constexpr (kDropout) mask.row_factors(mask.draw(warp_first / 16, chunk_first / 16, group, pair), factors);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
#pragma unroll
          for (int t = 0; t < 2; ++t) {
#pragma unroll
            for (int j = 0; j < 2; ++j) {
              const int e = 2 * h + j;
              const int key = chunk_first + 8 * t + 2 * pair + j;
              float p = fast_exp2(fmaf(s[t][e], scale_log2, -lse_log2[h]));
              if (needs_mask && key > rows[h]) p = 0.0f;
              const float factor = factors[t][e];
              dp[t][e] = p * (dp[t][e] * factor - d_values[h]);
            }
          }
        }
        std::uint32_t d_scores[4];
        a_from_c(d_scores, dp[0], dp[1]);
#pragma unroll
        for (int dd = 0; dd < kSlices; ++dd) {
          std::uint32_t b[4];
          load_matrices_transposed(b, key_address + a_lane + tile_offset<kHeadDim>(16 * chunk, 16 * dd));
          mma_pair(dq[2 * dd], dq[2 * dd + 1], d_scores, b);
        }
      };
      // Keys all at or before the warp's first query: no step is skipped or masked.
      if (first_key + kStreamRows - 1 <= warp_first) {
#pragma unroll
        for (int chunk = 0; chunk < kChunks; ++chunk) step(chunk, std::false_type{});
      } else {
#pragma unroll
        for (int chunk = 0; chunk < kChunks; ++chunk) step(chunk, std::true_type{});
      }
    }
  }
  wait_copies<0>();
  if (!warp_active) return;

  // The warp's own query rows are free once its fragments are loaded: they stage dq.
  store_warp_rows<kHeadDim>(dq, scale, scale, query_tile + warp * kWarpRows * kPitch<kHeadDim>,
                            operands.d_qkv + sample_token * token_stride + head * kHeadDim, token_stride, warp_first,
                            seq);
}

}  // namespace

cudaError_t launch_backward_query_pass(const BackwardOperands& operands, const Problem& problem, const Dropout& dropout,
                                       cudaStream_t stream) {
  return with_mma_sync_head_dim_and_dropout(problem.head_dim, dropout.enabled, [&](auto head, auto with_dropout) {
    constexpr int kHeadDim = decltype(head)::value;
    constexpr bool kDropout = decltype(with_dropout)::value;
    const float scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
    return launch_over_row_blocks(flash_backward_query_kernel<kHeadDim, kDropout>,
                                  QueryPassConfig<kHeadDim, kDropout>::kBytes, problem, stream, operands, problem,
                                  dropout, scale, kLog2E * scale);
  });
}

}  // namespace adamant::kernels::cuda::flash_attention_launchers
