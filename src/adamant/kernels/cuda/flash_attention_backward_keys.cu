// Key pass of the flash attention backward (flash_attention_backward_passes.h):
// one block of 8 warps per (sample, head, 128 keys), each warp owning 16 keys and
// their dk and dv accumulators in registers. Query, d_out and row-statistics tiles
// of 64 queries stream through shared memory (a cp.async pipeline), from the
// diagonal to the end of the sequence; a warp takes them 16 queries at a time:
//   s^T = k q^T, dp^T = v d_out^T (the warp's k and v as A fragments),
//   p^T = exp2(s^T scale log2(e) - logsumexp log2(e)), ds^T = p^T (dp^T f - D),
//   dv += (p^T f) d_out, dk += ds^T q (q and d_out through transposed ldmatrix),
// with f the dropout factor; dk is scaled by 1/sqrt(d) once at the end.
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

template <int kHeadDim>
struct KeyPassConfig {
  // The warp's key fragments stay in registers; its value fragments too up to
  // head_dim 80, above which they are read again from shared memory for every 16
  // queries. One block a multiprocessor with the fragments held was measured faster
  // (at head_dim 64, which these kernels served then) than two blocks that read both again.
  static constexpr bool kValuesInRegisters = kHeadDim <= 80;
  static constexpr int kMinBlocks = 1;
  static constexpr int kStages = 4;        // one block a multiprocessor: copies three steps ahead
  static constexpr std::size_t kKeys = 0;  // 128 rows; each warp's own rows stage its dk at the end
  static constexpr std::size_t kValues = kKeys + tile_bytes<kHeadDim>(kBlockRows);              // and its dv
  static constexpr std::size_t kQueries = kValues + tile_bytes<kHeadDim>(kBlockRows);           // stages of 64 rows
  static constexpr std::size_t kDOut = kQueries + kStages * tile_bytes<kHeadDim>(kStreamRows);  // stages of 64 rows
  static constexpr std::size_t kStatistics =
      kDOut + kStages * tile_bytes<kHeadDim>(kStreamRows);  // stages of (D, lse log2 e)
  static constexpr std::size_t kBytes = kStatistics + kStages * kStreamRows * 2 * sizeof(float);
};

template <int kHeadDim, bool kDropout>
__global__ void __launch_bounds__(kThreads, KeyPassConfig<kHeadDim>::kMinBlocks)
    flash_backward_key_kernel(BackwardOperands operands, Problem problem, Dropout dropout, float scale,
                              float scale_log2) {
  using Config = KeyPassConfig<kHeadDim>;
  constexpr int kStages = Config::kStages;
  constexpr int kSlices = kHeadDim / 16;
  constexpr int kOutTiles = kHeadDim / 8;
  constexpr int kChunks = kStreamRows / 16;  // 16-query steps per streamed tile
  constexpr std::uint32_t kStreamTileBytes = tile_bytes<kHeadDim>(kStreamRows);
  extern __shared__ __align__(128) unsigned char shared[];
  auto* key_tile = reinterpret_cast<std::uint16_t*>(shared + Config::kKeys);
  auto* value_tile = reinterpret_cast<std::uint16_t*>(shared + Config::kValues);
  auto* query_tiles = reinterpret_cast<std::uint16_t*>(shared + Config::kQueries);
  auto* d_out_tiles = reinterpret_cast<std::uint16_t*>(shared + Config::kDOut);
  auto* statistics = reinterpret_cast<float*>(shared + Config::kStatistics);

  const BlockPlace<kHeadDim> place(problem);
  const auto& [seq, sample, head, warp, lane, group, pair, channels, token_stride, sample_token] = place;
  // The grid's y runs over key blocks; the first keys see the most queries and start first.
  const int first_key = static_cast<int>(blockIdx.y) * kBlockRows;
  const int warp_first = first_key + warp * kWarpRows;
  const bool warp_active = warp_first < seq;
  const int first_query_block = first_key / kStreamRows;
  const int query_blocks = (seq + kStreamRows - 1) / kStreamRows;

  const std::uint16_t* q_base = place.q(operands.qkv);
  const std::uint16_t* d_out_base = place.rows_of(operands.d_out);

  auto load_query_block = [&](int block) {
    const int stage = (block - first_query_block) % kStages;
    const int first = block * kStreamRows;
    load_tile_async<kHeadDim, kStreamRows>(query_tiles + stage * kStreamRows * kPitch<kHeadDim>, q_base, token_stride,
                                           first, seq);
    load_tile_async<kHeadDim, kStreamRows>(d_out_tiles + stage * kStreamRows * kPitch<kHeadDim>, d_out_base, channels,
                                           first, seq);
    load_statistics_async(statistics + stage * 2 * kStreamRows, place, operands.d_qkv, first);
  };

  load_tile_async<kHeadDim, kBlockRows>(key_tile, q_base + channels, token_stride, first_key, seq);
  load_tile_async<kHeadDim, kBlockRows>(value_tile, q_base + 2 * channels, token_stride, first_key, seq);
  load_query_block(first_query_block);
  commit_copies();
#pragma unroll
  for (int ahead = 1; ahead < kStages - 1; ++ahead) {
    if (first_query_block + ahead < query_blocks) load_query_block(first_query_block + ahead);
    commit_copies();
  }

  const std::uint32_t a_lane = a_pattern<kHeadDim>(lane);
  const std::uint32_t b_lane = b_pattern<kHeadDim>(lane);
  const std::uint32_t key_address = shared_address(key_tile) + tile_offset<kHeadDim>(warp * kWarpRows, 0) + a_lane;
  const std::uint32_t value_address = shared_address(value_tile) + tile_offset<kHeadDim>(warp * kWarpRows, 0) + a_lane;

  std::uint32_t k_frags[kSlices][4];
  std::uint32_t v_frags[Config::kValuesInRegisters ? kSlices : 1][4];
  float dk[kOutTiles][4];
  float dv[kOutTiles][4];
#pragma unroll
  for (int n = 0; n < kOutTiles; ++n) {
#pragma unroll
    for (int e = 0; e < 4; ++e) dk[n][e] = dv[n][e] = 0.0f;
  }
  const int keys[2] = {warp_first + group, warp_first + group + 8};
  const attention_detail::DropoutMask mask(dropout, sample, head, seq);

  for (int block = first_query_block; block < query_blocks; ++block) {
    wait_copies<kStages - 2>();  // this block's copies have landed; later blocks' may be in flight
    __syncthreads();
    if (block + kStages - 1 < query_blocks) load_query_block(block + kStages - 1);
    commit_copies();
    const int stage = (block - first_query_block) % kStages;

    if (warp_active) {
      if (block == first_query_block) {
#pragma unroll
        for (int kk = 0; kk < kSlices; ++kk) {
          load_matrices(k_frags[kk], key_address + tile_offset<kHeadDim>(0, 16 * kk));
          if constexpr (Config::kValuesInRegisters) {
            load_matrices(v_frags[kk], value_address + tile_offset<kHeadDim>(0, 16 * kk));
          }
        }
      }
      const std::uint32_t query_address = shared_address(query_tiles) + stage * kStreamTileBytes;
      const std::uint32_t d_out_address = shared_address(d_out_tiles) + stage * kStreamTileBytes;
      const float* stage_statistics = statistics + stage * 2 * kStreamRows;
      // One 16-query step. An edge step may have queries before the warp's keys or
      // past seq; interior steps skip those checks, so that a block of them is
      // straight-line code the compiler can interleave.
      auto step = [&](int chunk, auto edge) {
        constexpr bool kEdge = decltype(edge)::value;
        const int chunk_first = block * kStreamRows + 16 * chunk;
        if constexpr (kEdge) {
          // Queries all before the warp's keys see none of them; queries past seq do not exist.
          if (chunk_first + 15 < warp_first || chunk_first >= seq) return;
        }
        float s[2][4] = {};
        float dp[2][4] = {};
#pragma unroll
        for (int kk = 0; kk < kSlices; ++kk) {
          std::uint32_t b[4];
          load_matrices(b, query_address + b_lane + tile_offset<kHeadDim>(16 * chunk, 16 * kk));
          mma_pair(s[0], s[1], k_frags[kk], b);
          load_matrices(b, d_out_address + b_lane + tile_offset<kHeadDim>(16 * chunk, 16 * kk));
          if constexpr (Config::kValuesInRegisters) {
            mma_pair(dp[0], dp[1], v_frags[kk], b);
          } else {
            std::uint32_t v[4];
            load_matrices(v, value_address + tile_offset<kHeadDim>(0, 16 * kk));
            mma_pair(dp[0], dp[1], v, b);
          }
        }
        const bool needs_mask = kEdge && (chunk_first < warp_first + 15 || chunk_first + 15 >= seq);
        // Queries {chunk_first + 8 t + 2 pair + j} x this thread's two keys, element
        // e = 2 h + j of n8 tile t, from two draws shared with the neighbouring lane
        // (attention_dropout_layout.h).
        float factors[2][4] = {{1.0f, 1.0f, 1.0f, 1.0f}, {1.0f, 1.0f, 1.0f, 1.0f}};
        if constexpr (kDropout) mask.column_factors(chunk_first / 16, warp_first / 16, group, pair, factors);
#pragma unroll
        for (int t = 0; t < 2; ++t) {
          // (D, lse log2 e) of queries 2 pair and 2 pair + 1 of this n8 tile.
          const float4 stats = *reinterpret_cast<const float4*>(stage_statistics + 2 * (16 * chunk + 8 * t + 2 * pair));
          const float d_values[2] = {stats.x, stats.z};
          const float lse_log2[2] = {stats.y, stats.w};
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int query = chunk_first + 8 * t + 2 * pair + (e & 1);
            const int key = keys[e >> 1];
            float p = fast_exp2(fmaf(s[t][e], scale_log2, -lse_log2[e & 1]));
            if (needs_mask && (query < key || query >= seq)) p = 0.0f;
            const float factor = factors[t][e];
            s[t][e] = p * factor;
            dp[t][e] = p * (dp[t][e] * factor - d_values[e & 1]);
          }
        }
        std::uint32_t probs[4];
        std::uint32_t d_scores[4];
        a_from_c(probs, s[0], s[1]);
        a_from_c(d_scores, dp[0], dp[1]);
#pragma unroll
        for (int dd = 0; dd < kSlices; ++dd) {
          std::uint32_t b[4];
          load_matrices_transposed(b, d_out_address + a_lane + tile_offset<kHeadDim>(16 * chunk, 16 * dd));
          mma_pair(dv[2 * dd], dv[2 * dd + 1], probs, b);
          load_matrices_transposed(b, query_address + a_lane + tile_offset<kHeadDim>(16 * chunk, 16 * dd));
          mma_pair(dk[2 * dd], dk[2 * dd + 1], d_scores, b);
        }
      };
      const int block_first = block * kStreamRows;
      if (block_first >= warp_first + kWarpRows - 1 && block_first + kStreamRows <= seq) {
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

  // The warp's own key and value rows stage its results (no other warp reads them).
  std::uint16_t* dk_base = operands.d_qkv + sample_token * token_stride + channels + head * kHeadDim;
  store_warp_rows<kHeadDim>(dk, scale, scale, key_tile + warp * kWarpRows * kPitch<kHeadDim>, dk_base, token_stride,
                            warp_first, seq);
  store_warp_rows<kHeadDim>(dv, 1.0f, 1.0f, value_tile + warp * kWarpRows * kPitch<kHeadDim>, dk_base + channels,
                            token_stride, warp_first, seq);
}

}  // namespace

cudaError_t launch_backward_key_pass(const BackwardOperands& operands, const Problem& problem, const Dropout& dropout,
                                     cudaStream_t stream) {
  return with_mma_sync_head_dim_and_dropout(problem.head_dim, dropout.enabled, [&](auto head, auto with_dropout) {
    constexpr int kHeadDim = decltype(head)::value;
    constexpr bool kDropout = decltype(with_dropout)::value;
    const float scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
    return launch_over_row_blocks(flash_backward_key_kernel<kHeadDim, kDropout>, KeyPassConfig<kHeadDim>::kBytes,
                                  problem, stream, operands, problem, dropout, scale, kLog2E * scale);
  });
}

}  // namespace adamant::kernels::cuda::flash_attention_launchers
