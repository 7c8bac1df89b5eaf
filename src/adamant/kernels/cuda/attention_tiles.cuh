#pragma once
// Shared-memory tiles and warp-level tensor-core products of the attention kernels.
// A block works on 64 queries (or keys) at a time; a warp owns 16 of them. Token
// tiles hold 64 rows of one head's q, k, v or d_out slice (head_dim bf16 each) and
// 64-wide tiles hold scores or probabilities of 64 queries x 64 keys. Only for *.cu files.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <cstddef>
#include <cstdint>

#include "adamant/kernels/cuda/device_common.cuh"

namespace adamant::kernels::cuda::attention_detail {

namespace wmma = nvcuda::wmma;
using Bf16 = __nv_bfloat16;

constexpr int kTile = 64;               // queries or keys per block and per step
constexpr int kFrag = 16;               // edge of a wmma fragment
constexpr int kWarpRows = 16;           // rows of a tile a warp owns
constexpr int kChunk = 8;               // bf16 per 16-byte access
constexpr int kScorePitch = kTile + 4;  // fp32 64-wide tiles: wmma wants a multiple of 4; the skew spreads banks
constexpr int kProbPitch = kTile + 8;   // bf16 64-wide tiles: a multiple of 8 with a 16-byte skew
template <int kHeadDim>
constexpr int kTokenPitch = kHeadDim + 8;

constexpr std::size_t token_tile_bytes(int head_dim) {
  return static_cast<std::size_t>(kTile) * (head_dim + 8) * sizeof(std::uint16_t);
}
constexpr std::size_t kScoreTileBytes = static_cast<std::size_t>(kTile) * kScorePitch * sizeof(float);
constexpr std::size_t kProbTileBytes = static_cast<std::size_t>(kTile) * kProbPitch * sizeof(std::uint16_t);
// wmma loads and stores need 32-byte aligned addresses: every tile size keeps that.
static_assert(kScoreTileBytes % 32 == 0 && kProbTileBytes % 32 == 0 && token_tile_bytes(64) % 32 == 0);

using FragRowsA = wmma::fragment<wmma::matrix_a, kFrag, kFrag, kFrag, Bf16, wmma::row_major>;
using FragColsA = wmma::fragment<wmma::matrix_a, kFrag, kFrag, kFrag, Bf16, wmma::col_major>;
using FragRowsB = wmma::fragment<wmma::matrix_b, kFrag, kFrag, kFrag, Bf16, wmma::row_major>;
using FragColsB = wmma::fragment<wmma::matrix_b, kFrag, kFrag, kFrag, Bf16, wmma::col_major>;
using FragAcc = wmma::fragment<wmma::accumulator, kFrag, kFrag, kFrag, float>;

__device__ __forceinline__ const Bf16* as_bf16(const std::uint16_t* p) { return reinterpret_cast<const Bf16*>(p); }

__device__ __forceinline__ std::uint32_t pack_bf16x2(std::uint16_t low, std::uint16_t high) {
  return static_cast<std::uint32_t>(low) | (static_cast<std::uint32_t>(high) << 16);
}
__device__ __forceinline__ uint4 pack_chunk(const std::uint16_t (&bits)[kChunk]) {
  return make_uint4(pack_bf16x2(bits[0], bits[1]), pack_bf16x2(bits[2], bits[3]), pack_bf16x2(bits[4], bits[5]),
                    pack_bf16x2(bits[6], bits[7]));
}
__device__ __forceinline__ void unpack_chunk(uint4 v, std::uint16_t (&bits)[kChunk]) {
  const std::uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    bits[2 * i] = static_cast<std::uint16_t>(words[i]);
    bits[2 * i + 1] = static_cast<std::uint16_t>(words[i] >> 16);
  }
}

// Copies rows [first_row, first_row + 64) of one head's slice (kHeadDim bf16 at
// base + row * row_stride) into a token tile; rows at or past `seq` become zero.
template <int kHeadDim, int kThreads>
__device__ __forceinline__ void load_token_tile(std::uint16_t* tile, const std::uint16_t* base, std::int64_t row_stride,
                                                int first_row, int seq) {
  constexpr int kChunksPerRow = kHeadDim / kChunk;
  for (int index = static_cast<int>(threadIdx.x); index < kTile * kChunksPerRow; index += kThreads) {
    const int r = index / kChunksPerRow;
    const int c = index % kChunksPerRow;
    const int row = first_row + r;
    uint4 value = make_uint4(0, 0, 0, 0);
    if (row < seq) {
      value = __ldg(reinterpret_cast<const uint4*>(base + static_cast<std::int64_t>(row) * row_stride + c * kChunk));
    }
    *reinterpret_cast<uint4*>(tile + r * kTokenPitch<kHeadDim> + c * kChunk) = value;
  }
}

// Eight consecutive bf16 of a row of a [.., seq, seq] array from column first_col on;
// columns at or past `seq` read as zero. `vector_rows`: rows are 16-byte aligned.
__device__ __forceinline__ void load_row_chunk(const std::uint16_t* row, int first_col, int seq, bool vector_rows,
                                               std::uint16_t (&bits)[kChunk]) {
  if (vector_rows && first_col + kChunk <= seq) {
    unpack_chunk(__ldg(reinterpret_cast<const uint4*>(row + first_col)), bits);
    return;
  }
#pragma unroll
  for (int e = 0; e < kChunk; ++e) bits[e] = first_col + e < seq ? row[first_col + e] : std::uint16_t{0};
}
__device__ __forceinline__ void store_row_chunk(std::uint16_t* row, int first_col, int seq, bool vector_rows,
                                                const std::uint16_t (&bits)[kChunk]) {
  if (vector_rows && first_col + kChunk <= seq) {
    *reinterpret_cast<uint4*>(row + first_col) = pack_chunk(bits);
    return;
  }
#pragma unroll
  for (int e = 0; e < kChunk; ++e) {
    if (first_col + e < seq) row[first_col + e] = bits[e];
  }
}

// out[16 x 64] = a[16 x kHeadDim] . tile[64 x kHeadDim]^T: a warp's rows (as fragments)
// against the 64 rows of a token tile; out is the warp's part of an fp32 64-wide tile.
template <int kHeadDim>
__device__ __forceinline__ void rows_times_tile_transposed(const FragRowsA (&a)[kHeadDim / kFrag],
                                                           const std::uint16_t* tile, float* out) {
#pragma unroll
  for (int n = 0; n < kTile / kFrag; ++n) {
    FragAcc acc;
    wmma::fill_fragment(acc, 0.0f);
#pragma unroll
    for (int k = 0; k < kHeadDim / kFrag; ++k) {
      // Column-major B at (k, n) reads tile[n][k]: the tile transposed.
      FragColsB b;
      wmma::load_matrix_sync(b, as_bf16(tile + n * kFrag * kTokenPitch<kHeadDim> + k * kFrag), kTokenPitch<kHeadDim>);
      wmma::mma_sync(acc, a[k], b, acc);
    }
    wmma::store_matrix_sync(out + n * kFrag, acc, kScorePitch, wmma::mem_row_major);
  }
}

// acc[16 x kHeadDim] += rows[16 x 64] . tile[64 x kHeadDim]: a warp's rows of a bf16
// 64-wide tile times a token tile.
template <int kHeadDim>
__device__ __forceinline__ void accumulate_rows_times_tile(FragAcc (&acc)[kHeadDim / kFrag], const std::uint16_t* rows,
                                                           const std::uint16_t* tile) {
#pragma unroll
  for (int k = 0; k < kTile / kFrag; ++k) {
    FragRowsA a;
    wmma::load_matrix_sync(a, as_bf16(rows + k * kFrag), kProbPitch);
#pragma unroll
    for (int n = 0; n < kHeadDim / kFrag; ++n) {
      FragRowsB b;
      wmma::load_matrix_sync(b, as_bf16(tile + k * kFrag * kTokenPitch<kHeadDim> + n * kFrag), kTokenPitch<kHeadDim>);
      wmma::mma_sync(acc[n], a, b, acc[n]);
    }
  }
}

// Writes a warp's 16 accumulated rows as bf16: acc[n] holds columns [16n, 16n + 16);
// row r goes to dst + (first_row + r) * row_stride, for rows before `seq` only.
// `staging` is 16 x 16 floats of the warp's own, 32-byte aligned.
template <int kFrags>
__device__ __forceinline__ void store_rows_bf16(const FragAcc (&acc)[kFrags], float* staging, std::uint16_t* dst,
                                                std::int64_t row_stride, int first_row, int seq) {
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int r = lane / 2;
  const int c = (lane % 2) * kChunk;
#pragma unroll
  for (int n = 0; n < kFrags; ++n) {
    wmma::store_matrix_sync(staging, acc[n], kFrag, wmma::mem_row_major);
    __syncwarp();
    if (first_row + r < seq) {
      std::uint16_t bits[kChunk];
#pragma unroll
      for (int e = 0; e < kChunk; ++e) bits[e] = detail::f32_to_bf16_bits(staging[r * kFrag + c + e]);
      *reinterpret_cast<uint4*>(dst + static_cast<std::int64_t>(first_row + r) * row_stride + n * kFrag + c) =
          pack_chunk(bits);
    }
    __syncwarp();
  }
}

}  // namespace adamant::kernels::cuda::attention_detail
