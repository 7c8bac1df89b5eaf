// Causal flash attention forward (kernels/flash_attention.h): the entry point, which
// sends head sizes 64 and 128 to the wgmma kernel (flash_attention_forward_wgmma.cu),
// and the mma.sync kernel for 80 and 96, FlashAttention-2 style: one block of 8 warps per (sample, head, 128 queries),
// each warp owning 16 query rows whose q fragments, scores, probabilities and output accumulators stay in registers.
// Key and value tiles of 64 rows stream through shared memory in a cp.async pipeline of several stages
// (flash_attention_tiles.cuh); the online softmax (running row maximum and denominator, base-2 exponent with the scale
// folded in) rescales the output only when a row's maximum outgrows the running one
// by more than 2^8 in probability. Key tiles past the diagonal are never visited,
// and only the tiles that straddle it are masked. With dropout, the dropped probabilities
// are zeroed in registers and the kept ones' 1/(1-p) multiplies the output once, with the
// row's 1/denominator. It writes the bf16 output and each row's logsumexp, from which
// backward recomputes the probabilities.
#include <cuda_runtime.h>

#include <climits>
#include <cmath>
#include <cstdint>

#include "adamant/kernels/cuda/attention_philox.cuh"
#include "adamant/kernels/cuda/flash_attention_block.cuh"
#include "adamant/kernels/cuda/flash_attention_dispatch.cuh"
#include "adamant/kernels/cuda/flash_attention_forward_kernels.h"
#include "adamant/kernels/cuda/flash_attention_launchers.h"
#include "adamant/kernels/cuda/flash_attention_online_softmax.cuh"
#include "adamant/kernels/cuda/flash_attention_tiles.cuh"

namespace adamant::kernels::cuda::flash_attention_launchers {

namespace {

using namespace flash_detail;  // NOLINT(build/namespaces): the kernels' own helpers

template <int kHeadDim, bool kDropout>
struct ForwardConfig {
  // At head_dim 80 without dropout, two blocks share a multiprocessor (128 registers a
  // thread; measured faster than one block with all it needs); the others get one
  // block and the registers they need.
  static constexpr int kMinBlocks = kHeadDim <= 80 && !kDropout ? 2 : 1;
  static constexpr int kStages = kHeadDim >= 96 ? 4 : 3;  // deeper where one block holds a multiprocessor
  static constexpr std::size_t kQuery = 0;                // 128 rows, read once into fragments, then the output staging
  static constexpr std::size_t kKeys = kQuery + tile_bytes<kHeadDim>(kBlockRows);              // stages of 64 rows
  static constexpr std::size_t kValues = kKeys + kStages * tile_bytes<kHeadDim>(kStreamRows);  // stages of 64 rows
  static constexpr std::size_t kBytes = kValues + kStages * tile_bytes<kHeadDim>(kStreamRows);
};

template <int kHeadDim, bool kDropout>
__global__ void __launch_bounds__(kThreads, ForwardConfig<kHeadDim, kDropout>::kMinBlocks)
    flash_forward_kernel(ForwardOperands operands, Problem problem, Dropout dropout, float scale_log2) {
  using Config = ForwardConfig<kHeadDim, kDropout>;
  constexpr int kStages = Config::kStages;
  constexpr int kSlices = kHeadDim / 16;      // k steps of q k^T
  constexpr int kKeyTiles = kStreamRows / 8;  // n8 tiles of a score row block
  constexpr int kOutTiles = kHeadDim / 8;     // n8 tiles of the output
  constexpr std::uint32_t kStreamTileBytes = tile_bytes<kHeadDim>(kStreamRows);
  extern __shared__ __align__(128) unsigned char shared[];
  auto* query_tile = reinterpret_cast<std::uint16_t*>(shared + Config::kQuery);
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

  auto load_keys = [&](int block) {
    const int stage = block % kStages;
    load_tile_async<kHeadDim, kStreamRows>(key_tiles + stage * kStreamRows * kPitch<kHeadDim>, k_base, token_stride,
                                           block * kStreamRows, seq);
    load_tile_async<kHeadDim, kStreamRows>(value_tiles + stage * kStreamRows * kPitch<kHeadDim>, v_base, token_stride,
                                           block * kStreamRows, seq);
  };
  load_tile_async<kHeadDim, kBlockRows>(query_tile, q_base, token_stride, first_query, seq);
  load_keys(0);
  commit_copies();
#pragma unroll
  for (int ahead = 1; ahead < kStages - 1; ++ahead) {
    if (0 + ahead < key_blocks) load_keys(0 + ahead);
    commit_copies();
  }

  const std::uint32_t a_lane = a_pattern<kHeadDim>(lane);
  const std::uint32_t b_lane = b_pattern<kHeadDim>(lane);
  const std::uint32_t query_address = shared_address(query_tile) + tile_offset<kHeadDim>(warp * kWarpRows, 0) + a_lane;

  std::uint32_t q_frags[kSlices][4];
  float out[kOutTiles][4];
#pragma unroll
  for (int n = 0; n < kOutTiles; ++n) out[n][0] = out[n][1] = out[n][2] = out[n][3] = 0.0f;
  OnlineSoftmax softmax;
  const int rows[2] = {warp_first + group, warp_first + group + 8};
  const attention_detail::DropoutMask mask(dropout, sample, head, seq);

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
        for (int kk = 0; kk < kSlices; ++kk)
          load_matrices(q_frags[kk], query_address + tile_offset<kHeadDim>(0, 16 * kk));
      }
      const std::uint32_t key_address = shared_address(key_tiles) + stage * kStreamTileBytes + b_lane;
      const std::uint32_t value_address = shared_address(value_tiles) + stage * kStreamTileBytes + a_lane;

      float scores[kKeyTiles][4];
#pragma unroll
      for (int t = 0; t < kKeyTiles; ++t) scores[t][0] = scores[t][1] = scores[t][2] = scores[t][3] = 0.0f;
#pragma unroll
      for (int kk = 0; kk < kSlices; ++kk) {
#pragma unroll
        for (int np = 0; np < kKeyTiles / 2; ++np) {
          std::uint32_t b[4];
          load_matrices(b, key_address + tile_offset<kHeadDim>(16 * np, 16 * kk));
          mma_pair(scores[2 * np], scores[2 * np + 1], q_frags[kk], b);
        }
      }

      // Only a tile that reaches past the warp's first row has keys after some query.
      if (first_key + kStreamRows - 1 > warp_first) mask_future_keys(scores, first_key, rows, pair);
      softmax.add_tile(scores, out, scale_log2);
      if constexpr (kDropout) mask.drop_in_rows(scores, warp_first, first_key, group, pair);

#pragma unroll
      for (int kk = 0; kk < kKeyTiles / 2; ++kk) {
        std::uint32_t probs[4];
        a_from_c(probs, scores[2 * kk], scores[2 * kk + 1]);
#pragma unroll
        for (int dp = 0; dp < kSlices; ++dp) {
          std::uint32_t b[4];
          load_matrices_transposed(b, value_address + tile_offset<kHeadDim>(16 * kk, 16 * dp));
          mma_pair(out[2 * dp], out[2 * dp + 1], probs, b);
        }
      }
    }
  }
  wait_copies<0>();
  if (!warp_active) return;

  // The warp's own query rows are free once its fragments are loaded: they stage the output.
  const float row_sums[2] = {softmax.total(0), softmax.total(1)};
  const float kept_scale = kDropout ? mask.keep_scale() : 1.0f;  // the kept probabilities' 1/(1-p)
  store_warp_rows<kHeadDim>(out, kept_scale / row_sums[0], kept_scale / row_sums[1],
                            query_tile + warp * kWarpRows * kPitch<kHeadDim>, place.rows_of(operands.out), channels,
                            warp_first, seq);
  softmax.write_logsumexp(operands.logsumexp + (static_cast<std::int64_t>(sample) * problem.heads + head) * seq, rows,
                          row_sums, seq, pair, scale_log2);
}

}  // namespace

cudaError_t flash_attention_forward(const ForwardOperands& operands, const Problem& problem, const Dropout& dropout,
                                    cudaStream_t stream) {
  if (problem.batch == 0 || problem.seq == 0) return cudaSuccess;
  if (static_cast<std::int64_t>(problem.batch) * problem.heads > INT_MAX) return cudaErrorInvalidConfiguration;
  if (uses_wgmma(problem.head_dim)) return launch_forward_wgmma(operands, problem, dropout, stream);
  return with_mma_sync_head_dim_and_dropout(problem.head_dim, dropout.enabled, [&](auto head, auto with_dropout) {
    constexpr int kHeadDim = decltype(head)::value;
    constexpr bool kDropout = decltype(with_dropout)::value;
    const float scale_log2 = kLog2E / std::sqrt(static_cast<float>(kHeadDim));
    return launch_over_row_blocks(flash_forward_kernel<kHeadDim, kDropout>, ForwardConfig<kHeadDim, kDropout>::kBytes,
                                  problem, stream, operands, problem, dropout, scale_log2);
  });
}

}  // namespace adamant::kernels::cuda::flash_attention_launchers
