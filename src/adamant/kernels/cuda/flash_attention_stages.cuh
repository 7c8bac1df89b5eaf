#pragma once
// The tile pipeline of the wgmma flash attention kernels (forward, key pass, query pass):
// tensor-memory copies (tensor_copy.cuh) issued by one thread of the block into
// swizzled tiles (wgmma.cuh), and the shared-memory barriers between that thread
// and the warps. A kernel's block tiles (its own 128 or 192 rows of queries or keys) land once
// on `block`; the streamed tiles rotate through kStages stages, tile i of a block's run
// in stage i % kStages, each stage with a `full` barrier (the copier's arrival and the
// tiles' bytes) and an `empty` one (one arrival a warp once its products on the stage are
// done). The copier refills a stage only after its `empty` barrier has completed for the
// tile the stage held before, so the warps never meet at __syncthreads and each
// warpgroup waits only for the tiles it reads. Only for *.cu files.
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "adamant/kernels/cuda/flash_attention_launchers.h"
#include "adamant/kernels/cuda/tensor_copy.cuh"
#include "adamant/kernels/cuda/wgmma.cuh"

namespace adamant::kernels::cuda::flash_detail {

// kArrivals: the warps that release each stage, all of the block's (kWarps for two
// warpgroups, more for a block of three).
template <int kStages, int kArrivals = kWarps>
struct StageBarriers {
  std::uint64_t full[kStages];
  std::uint64_t empty[kStages];
  std::uint64_t block;

  // By the copying thread, before the block's one __syncthreads.
  __device__ void init() {
#pragma unroll
    for (int stage = 0; stage < kStages; ++stage) {
      detail::barrier_init(&full[stage], 1);
      detail::barrier_init(&empty[stage], kArrivals);
    }
    detail::barrier_init(&block, 1);
    detail::barrier_init_fence();
  }
  // By the copying thread: waits until stage i % kStages is free for tile i, then tells
  // its `full` barrier to expect `bytes`. Returns that barrier.
  __device__ std::uint64_t* reserve(int i, std::uint32_t bytes) {
    const int stage = i % kStages;
    if (i >= kStages) detail::barrier_wait(&empty[stage], static_cast<std::uint32_t>(i / kStages - 1) & 1u);
    detail::barrier_arrive_expecting(&full[stage], bytes);
    return &full[stage];
  }
  // By the copying thread: tells the `block` barrier to expect `bytes`. Returns it.
  __device__ std::uint64_t* reserve_block(std::uint32_t bytes) {
    detail::barrier_arrive_expecting(&block, bytes);
    return &block;
  }
  // By every thread: waits until the block tiles have landed.
  __device__ void wait_block() { detail::barrier_wait(&block, 0); }
  // By every thread: waits until tile i has landed.
  __device__ void wait_full(int i) {
    detail::barrier_wait(&full[i % kStages], static_cast<std::uint32_t>(i / kStages) & 1u);
  }
  // By every thread once its warp's products on tile i are done: one arrival a warp.
  __device__ void release(int i, int lane) {
    if (lane == 0) detail::barrier_arrive(&empty[i % kStages]);
  }
};

// Host: the map of a problem's qkv [batch, seq, 3, heads, head_dim] and of an array of its
// heads' rows [batch, seq, heads, head_dim] (d_out), boxes of kStreamRows rows.
inline cudaError_t encode_qkv_map(CUtensorMap& map, const std::uint16_t* qkv,
                                  const flash_attention_launchers::Problem& problem) {
  const std::int64_t row = 3 * static_cast<std::int64_t>(problem.heads) * problem.head_dim;
  return detail::encode_token_rows_map(map, qkv, row, row, problem.seq, problem.batch, kStreamRows,
                                       swizzle_panel_columns(problem.head_dim));
}
inline cudaError_t encode_head_rows_map(CUtensorMap& map, const std::uint16_t* rows,
                                        const flash_attention_launchers::Problem& problem) {
  const std::int64_t row = static_cast<std::int64_t>(problem.heads) * problem.head_dim;
  return detail::encode_token_rows_map(map, rows, row, row, problem.seq, problem.batch, kStreamRows,
                                       swizzle_panel_columns(problem.head_dim));
}

// Starts the copy of rows [first_row, first_row + kRows) of one head's kHeadDim columns
// (from `column` of `map`, a map of kStreamRows-row boxes) into the swizzled tile at `tile`
// of kRows rows, on `barrier`: one box per panel and 64 rows.
template <int kHeadDim, int kRows>
__device__ __forceinline__ void copy_rows_async(unsigned char* tile, const CUtensorMap* map, int column, int first_row,
                                                int sample, std::uint64_t* barrier) {
  static_assert(kRows % kStreamRows == 0, "whole boxes of rows");
  using P = Panels<kHeadDim>;
#pragma unroll
  for (int panel = 0; panel < P::kCount; ++panel) {
#pragma unroll
    for (int part = 0; part < kRows / kStreamRows; ++part) {
      detail::copy_box_async(tile + panel * P::template bytes<kRows>() + part * P::template bytes<kStreamRows>(), map,
                             column + panel * P::kColumns, first_row + part * kStreamRows, sample, barrier);
    }
  }
}

// Starts the copies of streamed key tile `block` (kStreamRows keys from block * kStreamRows)
// and its value tile from qkv (k_column: the head's first key column, values `channels`
// further), on `full`.
template <int kHeadDim>
__device__ __forceinline__ void copy_key_value_tiles_async(unsigned char* key_tile, unsigned char* value_tile,
                                                           const CUtensorMap* qkv_map, int k_column, int channels,
                                                           int block, int sample, std::uint64_t* full) {
  copy_rows_async<kHeadDim, kStreamRows>(key_tile, qkv_map, k_column, block * kStreamRows, sample, full);
  copy_rows_async<kHeadDim, kStreamRows>(value_tile, qkv_map, k_column + channels, block * kStreamRows, sample, full);
}

}  // namespace adamant::kernels::cuda::flash_detail
