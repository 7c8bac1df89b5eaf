#pragma once
// Shared-memory helpers of the flash attention kernels, on top of the tiles of
// attention_tiles.cuh (64-row token tiles, 64-wide score and probability tiles,
// a warp owning 16 rows). Only for *.cu files.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "adamant/kernels/cuda/attention_tiles.cuh"

namespace adamant::kernels::cuda::flash_detail {

using namespace attention_detail;  // NOLINT(build/namespaces): the tile vocabulary shared with attention

constexpr int kThreads = 128;  // 4 warps of 16 rows
constexpr float kLog2E = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// fp32 rows of head_dim values (the forward's output accumulator): a multiple of 4
// floats, as wmma wants, with a skew that spreads the banks.
template <int kHeadDim>
constexpr int kAccPitch = kHeadDim + 4;
template <int kHeadDim>
constexpr std::size_t acc_tile_bytes() {
  return static_cast<std::size_t>(kTile) * kAccPitch<kHeadDim> * sizeof(float);
}

// What the kernels need of a head size: whole 16 x 16 wmma fragments, whole 16-byte
// chunks in each half row (lanes 2r and 2r + 1 split an output row), and tiles that
// keep the 32-byte alignment wmma wants. Nothing needs a power of two.
template <int kHeadDim>
constexpr bool fits_tiles() {
  return kHeadDim % kFrag == 0 && (kHeadDim / 2) % kChunk == 0 && token_tile_bytes(kHeadDim) % 32 == 0 &&
         acc_tile_bytes<kHeadDim>() % 32 == 0;
}
static_assert(fits_tiles<64>() && fits_tiles<80>() && fits_tiles<96>() && fits_tiles<128>());

// A warp's 16 rows of a token tile as row-major A fragments.
template <int kHeadDim>
__device__ __forceinline__ void load_warp_rows(FragRowsA (&frags)[kHeadDim / kFrag], const std::uint16_t* tile,
                                               int warp) {
#pragma unroll
  for (int k = 0; k < kHeadDim / kFrag; ++k) {
    wmma::load_matrix_sync(frags[k], as_bf16(tile + warp * kWarpRows * kTokenPitch<kHeadDim> + k * kFrag),
                           kTokenPitch<kHeadDim>);
  }
}

// acc_rows[16 x kHeadDim] (fp32 in shared memory, pitch kAccPitch) += rows[16 x 64]
// (bf16, pitch kProbPitch) . tile[64 x kHeadDim]. The accumulator stays in shared
// memory because the online softmax rescales it row by row, which wmma fragments
// (whose element-to-row mapping is opaque) cannot do in registers.
template <int kHeadDim>
__device__ __forceinline__ void accumulate_rows_times_tile_shared(float* acc_rows, const std::uint16_t* rows,
                                                                  const std::uint16_t* tile) {
  FragRowsA a[kTile / kFrag];
#pragma unroll
  for (int k = 0; k < kTile / kFrag; ++k) wmma::load_matrix_sync(a[k], as_bf16(rows + k * kFrag), kProbPitch);
#pragma unroll
  for (int n = 0; n < kHeadDim / kFrag; ++n) {
    FragAcc acc;
    wmma::load_matrix_sync(acc, acc_rows + n * kFrag, kAccPitch<kHeadDim>, wmma::mem_row_major);
#pragma unroll
    for (int k = 0; k < kTile / kFrag; ++k) {
      FragRowsB b;
      wmma::load_matrix_sync(b, as_bf16(tile + k * kFrag * kTokenPitch<kHeadDim> + n * kFrag), kTokenPitch<kHeadDim>);
      wmma::mma_sync(acc, a[k], b, acc);
    }
    wmma::store_matrix_sync(acc_rows + n * kFrag, acc, kAccPitch<kHeadDim>, wmma::mem_row_major);
  }
}

// Sets every element of a block-shared fp32 array to zero.
__device__ __forceinline__ void zero_shared(float* data, int count) {
  for (int i = static_cast<int>(threadIdx.x); i < count; i += static_cast<int>(blockDim.x)) data[i] = 0.0f;
}

}  // namespace adamant::kernels::cuda::flash_detail
