// Causal flash attention forward (kernels/flash_attention.h) on Hopper's warpgroup tensor
// cores (wgmma.cuh), for head sizes 64, 80, 96 and 128: one block of two or three
// warpgroups (ForwardConfig) per (sample, head, 128 or 192 queries), each warpgroup owning
// 64 query rows. Per 64-key tile
// streamed through shared memory (tensor-memory copies of swizzled tiles,
// flash_attention_stages.cuh), a warpgroup makes s = q k^T with both operands read from
// shared memory, runs the online softmax (flash_attention_online_softmax.cuh: base-2
// exponent with the scale folded in, rescaling only when a row's maximum outgrows the
// running one by more than 2^8) on the scores in registers, and adds p v with p as a
// register operand, that product running while the warpgroup exponentiates the next
// tile. Key tiles past the diagonal are never visited, and only the tiles that straddle
// it are masked. With dropout, the dropped probabilities are zeroed in registers and the
// kept ones' 1/(1-p) multiplies the output once, with the row's 1/denominator. It writes
// the bf16 output and each row's logsumexp, from which backward recomputes the
// probabilities.
#include <cuda_runtime.h>

#include <climits>
#include <cmath>
#include <cstdint>

#include "adamant/kernels/cuda/attention_philox.cuh"
#include "adamant/kernels/cuda/flash_attention_block.cuh"
#include "adamant/kernels/cuda/flash_attention_dispatch.cuh"
#include "adamant/kernels/cuda/flash_attention_online_softmax.cuh"
#include "adamant/kernels/cuda/flash_attention_stages.cuh"
#include "adamant/kernels/cuda/flash_attention_tiles.cuh"
#include "adamant/kernels/cuda/wgmma.cuh"

namespace adamant::kernels::cuda::flash_attention_launchers {

namespace {

using namespace flash_detail;  // NOLINT(build/namespaces): the kernels' own helpers

// The block's shape per head size and dropout, as measured on an H100 (BENCHMARKS.md):
// - head size 64: two warpgroups (128 queries), two blocks a multiprocessor;
// - 96 without dropout: the same, with three stages so that two blocks fit in shared memory;
// - 128, and 80 or 96 with dropout: three warpgroups (192 queries, 12 warps), one block,
//   which read each key and value tile for half as many queries again and give the tensor
//   cores a third warpgroup's products while the others exponentiate;
// - 80 without dropout: two warpgroups, one block (both others measured slower).
template <int kHeadDim, bool kDropout>
struct ForwardConfig {
  static constexpr int kGroups = kHeadDim == 128 || (kDropout && kHeadDim != 64) ? 3 : 2;
  static constexpr int kRows = kGroups * kGroupRows;  // the block's queries
  static constexpr int kMinBlocks = kHeadDim == 64 || (kHeadDim == 96 && !kDropout) ? 2 : 1;
  // At least 3: tiles i and i - 1 in use, copies ahead.
  static constexpr int kStages = kHeadDim == 96 && kMinBlocks == 2 ? 3 : 4;
  static constexpr std::size_t kStreamTile = swizzled_tile_bytes<kHeadDim, kStreamRows>();
  static constexpr std::size_t kQuery = 0;  // the block's rows, then the output staging
  static constexpr std::size_t kKeys = kQuery + swizzled_tile_bytes<kHeadDim, kRows>();
  static constexpr std::size_t kValues = kKeys + kStages * kStreamTile;
  static constexpr std::size_t kBytes = kValues + kStages * kStreamTile + kSwizzleAlignment;  // + alignment slack
};

template <int kHeadDim, bool kDropout>
__global__ void __launch_bounds__(block_threads<ForwardConfig<kHeadDim, kDropout>::kRows>(),
                                  ForwardConfig<kHeadDim, kDropout>::kMinBlocks)
    flash_forward_kernel(const __grid_constant__ CUtensorMap qkv_map, ForwardOperands operands, Problem problem,
                         Dropout dropout, float scale_log2) {
  using Config = ForwardConfig<kHeadDim, kDropout>;
  constexpr int kRows = Config::kRows;
  constexpr int kStages = Config::kStages;
  constexpr int kKeyTiles = kStreamRows / 8;  // n8 tiles of a score row block
  constexpr int kOutTiles = kHeadDim / 8;     // n8 tiles of the output
  extern __shared__ unsigned char shared_raw[];
  __shared__ StageBarriers<kStages, block_warps<kRows>()> stages;
  unsigned char* shared = align_shared<kSwizzleAlignment>(shared_raw);
  unsigned char* query_tile = shared + Config::kQuery;
  unsigned char* key_tiles = shared + Config::kKeys;
  unsigned char* value_tiles = shared + Config::kValues;

  const BlockOrder order = launch_order();
  const BlockPlace<kHeadDim> place(problem, order.slot);
  const auto& [seq, sample, head, warp, lane, group, pair, channels, token_stride, sample_token] = place;
  const int first_query = first_row_longest_first<kRows>(order);
  const auto [warpgroup, group_first, group_last, group_active] = WarpgroupRows(warp, first_query, seq);
  const int warp_first = first_query + warp * kWarpRows;
  const int key_blocks = (min(first_query + kRows, seq) - 1) / kStreamRows + 1;

  // Thread 0 issues every copy (flash_attention_stages.cuh): the query tile once, then
  // the key and value tiles through the stages.
  const bool copier = threadIdx.x == 0;
  const int q_column = head * kHeadDim;
  const int k_column = static_cast<int>(channels) + q_column;
  auto load_keys = [&](int block) {
    const int stage = block % kStages;
    copy_key_value_tiles_async<kHeadDim>(key_tiles + stage * Config::kStreamTile,
                                         value_tiles + stage * Config::kStreamTile, &qkv_map, k_column,
                                         static_cast<int>(channels), block, sample,
                                         stages.reserve(block, static_cast<std::uint32_t>(2 * Config::kStreamTile)));
  };
  if (copier) stages.init();
  __syncthreads();
  if (copier) {
    copy_rows_async<kHeadDim, kRows>(
        query_tile, &qkv_map, q_column, first_query, sample,
        stages.reserve_block(static_cast<std::uint32_t>(swizzled_tile_bytes<kHeadDim, kRows>())));
    for (int ahead = 0; ahead < kStages - 2 && ahead < key_blocks; ++ahead) load_keys(ahead);
  }

  float out[kOutTiles][4];
#pragma unroll
  for (int n = 0; n < kOutTiles; ++n) out[n][0] = out[n][1] = out[n][2] = out[n][3] = 0.0f;
  OnlineSoftmax softmax;
  const int rows[2] = {warp_first + group, warp_first + group + 8};
  const attention_detail::DropoutMask mask(dropout, sample, head, seq);
  const std::uint32_t query_address = shared_address(query_tile);

  // Key tiles and warpgroups both start at multiples of 64, so a warpgroup that
  // reaches a tile sees its first key from every one of its rows.
  auto relevant = [&](int block) { return group_active && block * kStreamRows <= group_last; };
  float scores[kKeyTiles][4];
  auto issue_scores = [&](int block) {
    const std::uint32_t key_address =
        shared_address(key_tiles + static_cast<std::size_t>(block % kStages) * Config::kStreamTile);
    wgmma_fence();
    mma_rows_by_rows<kHeadDim, kRows>(scores, query_address, warpgroup * kGroupRows, key_address);
  };
  std::uint32_t probs[kKeyTiles / 2][4];
  auto issue_output = [&](int block) {
    const std::uint32_t value_address =
        shared_address(value_tiles + static_cast<std::size_t>(block % kStages) * Config::kStreamTile);
    wgmma_fence();
    mma_fragments_by_columns<kHeadDim, kStreamRows / 16, kStreamRows>(out, probs, value_address);
  };

  // Each tile issues its scores and then the previous tile's p v, which runs while
  // the warpgroup exponentiates this tile; the output is rescaled (rarely: see
  // OnlineSoftmax) only once that product is done. Every tile issues both products,
  // with zero probabilities where there is no previous tile or the warpgroup skips
  // it, so that the code is the same on every path: ptxas then sees that the wait
  // for the scores leaves only the p v running, and keeps the products
  // asynchronous. Tile i's copies start when tile i - kStages's p v is done in every
  // warp, kStages - 2 tiles ahead; the warpgroups meet at no barrier, each waiting
  // only for its tiles to land.
  fence_accumulators(out);  // set before any product is issued
#pragma unroll
  for (int kk = 0; kk < kKeyTiles / 2; ++kk) probs[kk][0] = probs[kk][1] = probs[kk][2] = probs[kk][3] = 0u;
  stages.wait_block();
  for (int block = 0; block < key_blocks; ++block) {
    const int first_key = block * kStreamRows;
    if (copier && block + kStages - 2 < key_blocks) load_keys(block + kStages - 2);
    __syncwarp();
    stages.wait_full(block);
    issue_scores(block);
    wgmma_commit();
    issue_output(block > 0 ? block - 1 : block);  // adds nothing on the first tile
    wgmma_commit();
    wgmma_wait<1>();  // this tile's scores; the previous tile's p v may still run
    fence_accumulators(scores);
    bool moves = false;
    const bool needed = relevant(block);
    if (needed) {
      // Only a tile that reaches past the warp's first row has keys after some query.
      if (first_key + kStreamRows - 1 > warp_first) mask_future_keys(scores, first_key, rows, pair);
      moves = softmax.exponentiate(scores, scale_log2);
      if constexpr (kDropout) mask.drop_in_rows(scores, warp_first, first_key, group, pair);
    }
    wgmma_wait<0>();  // the previous tile's p v: the output and its operands are free
    fence_accumulators(out);
    if (block > 0) stages.release(block - 1, lane);
    if (moves) softmax.rescale_output(out);
#pragma unroll
    for (int kk = 0; kk < kKeyTiles / 2; ++kk) {
      a_from_c(probs[kk], scores[2 * kk], scores[2 * kk + 1]);
      if (!needed) probs[kk][0] = probs[kk][1] = probs[kk][2] = probs[kk][3] = 0u;
    }
  }
  issue_output(key_blocks - 1);
  wgmma_commit();
  wgmma_wait<0>();
  fence_accumulators(out);
  if (!group_active) return;

  // The warp's own query rows are read only by its warpgroup's products, all done: they stage the output.
  const float row_sums[2] = {softmax.total(0), softmax.total(1)};
  const float kept_scale = kDropout ? mask.keep_scale() : 1.0f;  // the kept probabilities' 1/(1-p)
  store_warp_rows_swizzled<kHeadDim, kRows>(out, kept_scale / row_sums[0], kept_scale / row_sums[1], query_tile,
                                            warp * kWarpRows, place.rows_of(operands.out), channels, warp_first, seq);
  softmax.write_logsumexp(place.head_row_of(operands.logsumexp), rows, row_sums, seq, pair, scale_log2);
}

}  // namespace

cudaError_t flash_attention_forward(const ForwardOperands& operands, const Problem& problem, const Dropout& dropout,
                                    cudaStream_t stream) {
  if (problem.batch == 0 || problem.seq == 0) return cudaSuccess;
  if (static_cast<std::int64_t>(problem.batch) * problem.heads > INT_MAX) return cudaErrorInvalidConfiguration;
  return with_supported_head_dim_and_dropout(problem.head_dim, dropout.enabled, [&](auto head, auto with_dropout) {
    constexpr int kHeadDim = decltype(head)::value;
    constexpr bool kDropout = decltype(with_dropout)::value;
    const float scale_log2 = kLog2E / std::sqrt(static_cast<float>(kHeadDim));
    CUtensorMap qkv_map;
    const cudaError_t encoded = encode_qkv_map(qkv_map, operands.qkv, problem);
    if (encoded != cudaSuccess) return encoded;
    using Config = ForwardConfig<kHeadDim, kDropout>;
    return launch_over_row_blocks<Config::kRows>(flash_forward_kernel<kHeadDim, kDropout>, Config::kBytes, problem,
                                                 stream, qkv_map, operands, problem, dropout, scale_log2);
  });
}

}  // namespace adamant::kernels::cuda::flash_attention_launchers
