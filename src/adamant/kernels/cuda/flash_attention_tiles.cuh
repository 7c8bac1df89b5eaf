#pragma once
// Warp-level building blocks of the flash attention kernels: bf16 tensor-core
// products (mma.sync m16n8k16, fp32 accumulation), shared-memory fragment loads
// (ldmatrix, plain and transposed), asynchronous tile copies (cp.async, async_copy.cuh) and the
// padded tiles they work on. Only for *.cu files.
//
// Fragments of mma.m16n8k16, lane = 4 * group + pair (group 0..7, pair 0..3):
//   A (16 x 16, row-major): a[0] = (group, 2 pair + {0,1}), a[1] = (group + 8, ...),
//                           a[2] = (group, 8 + 2 pair + {0,1}), a[3] = (group + 8, 8 + ...)
//   B (16 x 8, k x n):      b[0] = (k = 2 pair + {0,1}, n = group), b[1] = (k = 8 + 2 pair + {0,1}, n = group)
//   C (16 x 8, fp32):       c[0..1] = (group, 2 pair + {0,1}), c[2..3] = (group + 8, 2 pair + {0,1})
// Two C tiles side by side (16 x 16) hold exactly the values of one A fragment, so
// probabilities and score gradients go from one product into the next in registers.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "adamant/kernels/cuda/async_copy.cuh"
#include "adamant/kernels/cuda/device_common.cuh"

namespace adamant::kernels::cuda::flash_detail {

using detail::fast_exp2;
using detail::pack_bf16;

constexpr int kWarpSize = 32;
constexpr int kWarps = 8;
constexpr int kThreads = kWarps * kWarpSize;
constexpr int kWarpRows = 16;                   // rows of the block's own tile a warp owns
constexpr int kBlockRows = kWarps * kWarpRows;  // queries (or keys) a block owns
constexpr int kStreamRows = 64;                 // keys (or queries) streamed through shared memory per step
// Streamed tiles rotate through a kernel's kStages (at least 2) shared-memory
// stages: step i waits for its own copies, passes one barrier (after which every
// warp is done with step i - 1), then starts the copies of step i + kStages - 1 into
// step i - 1's stage. One barrier a step, copies kStages - 1 steps ahead.
constexpr int kChunk = 8;  // bf16 per 16-byte access
constexpr float kLog2E = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// Token tiles: rows of one head's q, k, v or d_out slice. A 16-byte skew per row
// puts the 8 rows an ldmatrix phase reads at one column into 8 distinct groups of
// 4 banks for every supported head size (pitch = 4 mod 8 words).
template <int kHeadDim>
constexpr int kPitch = kHeadDim + kChunk;
template <int kHeadDim>
constexpr std::size_t tile_bytes(int rows) {
  return static_cast<std::size_t>(rows) * kPitch<kHeadDim> * sizeof(std::uint16_t);
}
template <int kHeadDim>
constexpr bool supported_tiles() {
  return kHeadDim % 16 == 0 && (kPitch<kHeadDim> / 2) % 8 == 4;
}
static_assert(supported_tiles<64>() && supported_tiles<80>() && supported_tiles<96>() && supported_tiles<128>());

using detail::commit_copies;
using detail::copy_async_16;
using detail::copy_async_8;
using detail::shared_address;
using detail::wait_copies;

// Starts copying rows [first_row, first_row + kRows) of one head's slice (kCols bf16 at
// base + row * row_stride) into shared memory, 16-byte chunk c of tile row r to
// tile + chunk_offset(r, c) (bytes); rows at or past `seq` become zero.
template <int kCols, int kRows, typename ChunkOffset>
__device__ __forceinline__ void load_rows_async(unsigned char* tile, const std::uint16_t* base, std::int64_t row_stride,
                                                int first_row, int seq, ChunkOffset chunk_offset) {
  constexpr int kChunksPerRow = kCols / kChunk;
  constexpr int kTotal = kRows * kChunksPerRow;
#pragma unroll
  for (int step = 0; step < (kTotal + kThreads - 1) / kThreads; ++step) {
    const int index = step * kThreads + static_cast<int>(threadIdx.x);
    if (kTotal % kThreads == 0 || index < kTotal) {
      const int r = index / kChunksPerRow;
      const int c = index % kChunksPerRow;
      const int row = first_row + r;
      const bool valid = row < seq;
      const std::uint16_t* src = base + static_cast<std::int64_t>(valid ? row : 0) * row_stride + c * kChunk;
      copy_async_16(tile + chunk_offset(r, c), src, valid);
    }
  }
}

// load_rows_async into a token tile (rows kPitch apart).
template <int kHeadDim, int kRows>
__device__ __forceinline__ void load_tile_async(std::uint16_t* tile, const std::uint16_t* base, std::int64_t row_stride,
                                                int first_row, int seq) {
  load_rows_async<kHeadDim, kRows>(reinterpret_cast<unsigned char*>(tile), base, row_stride, first_row, seq,
                                   [](int r, int c) { return (r * kPitch<kHeadDim> + c * kChunk) * 2; });
}

// ---- fragments ----

// Per-lane byte offsets of the rows an x4 ldmatrix reads, relative to the 16 x 16
// sub-tile at (row0, col0) of a token tile:
//  - a_pattern: A fragment of rows x columns (non-transposed load), or, with the
//    transposed load, the B fragments of two n8 tiles where tile rows are k and
//    columns n ({b[0], b[1]} for columns col0 .. col0 + 7, {b[2], b[3]} for the next 8);
//  - b_pattern: the B fragments of two n8 tiles where tile rows are n and columns k
//    (non-transposed load; {b[0], b[1]} for rows row0 .. row0 + 7, {b[2], b[3]} for the next 8).
template <int kHeadDim>
__device__ __forceinline__ std::uint32_t a_pattern(int lane) {
  return static_cast<std::uint32_t>(((lane & 7) + (lane & 8)) * kPitch<kHeadDim> + (lane >> 4) * 8) * 2u;
}
template <int kHeadDim>
__device__ __forceinline__ std::uint32_t b_pattern(int lane) {
  return static_cast<std::uint32_t>(((lane & 7) + (lane >> 4) * 8) * kPitch<kHeadDim> + (lane & 8)) * 2u;
}
// Byte offset of element (row, col) of a token tile.
template <int kHeadDim>
constexpr std::uint32_t tile_offset(int row, int col) {
  return static_cast<std::uint32_t>(row * kPitch<kHeadDim> + col) * 2u;
}

__device__ __forceinline__ void load_matrices(std::uint32_t (&r)[4], std::uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address)
               : "memory");
}
__device__ __forceinline__ void load_matrices_transposed(std::uint32_t (&r)[4], std::uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address)
               : "memory");
}
// The inverse of load_matrices: lanes 8 i .. 8 i + 7 give the row addresses of matrix i,
// whose elements (row group, columns 2 pair + {0, 1}) are r[i] of lane 4 group + pair.
__device__ __forceinline__ void store_matrices(const std::uint32_t (&r)[4], std::uint32_t address) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(address), "r"(r[0]),
               "r"(r[1]), "r"(r[2]), "r"(r[3])
               : "memory");
}

// c += a . b for one 16 x 8 tile.
__device__ __forceinline__ void mma(float (&c)[4], const std::uint32_t (&a)[4], std::uint32_t b0, std::uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// c[2j], c[2j + 1] += a . (the two n8 tiles of one x4 load).
__device__ __forceinline__ void mma_pair(float (&c0)[4], float (&c1)[4], const std::uint32_t (&a)[4],
                                         const std::uint32_t (&b)[4]) {
  mma(c0, a, b[0], b[1]);
  mma(c1, a, b[2], b[3]);
}

// The A fragment made of two adjacent C tiles (columns 0..7 and 8..15).
__device__ __forceinline__ void a_from_c(std::uint32_t (&a)[4], const float (&left)[4], const float (&right)[4]) {
  a[0] = pack_bf16(left[0], left[1]);
  a[1] = pack_bf16(left[2], left[3]);
  a[2] = pack_bf16(right[0], right[1]);
  a[3] = pack_bf16(right[2], right[3]);
}

// Backward's per-row statistics (D = rowsum(d_out o), logsumexp * log2(e)) of
// (token, head): two fp32 at the start of that head's dq slice of d_qkv, which the
// query pass overwrites with dq only after reading them.
__device__ __forceinline__ float* row_statistics_slot(std::uint16_t* d_qkv, std::int64_t token,
                                                      std::int64_t token_stride, int head, int head_dim) {
  return reinterpret_cast<float*>(d_qkv + token * token_stride + static_cast<std::int64_t>(head) * head_dim);
}

// A warp's 16 rows of fp32 C fragments (kHeadDim / 8 n8 tiles, row `group` times
// scale_row0 and row `group + 8` times scale_row1) to bf16 global rows, staged through
// shared memory so that each lane writes whole 16-byte chunks: chunk c of staging row r
// (0..15) at staging + chunk_offset(r, c) bytes. Rows at or past `seq` are not written.
// The caller guarantees that nothing else reads or writes the staging rows meanwhile.
template <int kHeadDim, typename ChunkOffset>
__device__ __forceinline__ void store_warp_rows_staged(const float (&acc)[kHeadDim / 8][4], float scale_row0,
                                                       float scale_row1, unsigned char* staging,
                                                       ChunkOffset chunk_offset, std::uint16_t* dst,
                                                       std::int64_t row_stride, int first_row, int seq) {
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int group = lane / 4;
  const int pair = lane % 4;
  __syncwarp();  // every lane's earlier reads of the staging rows are done
#pragma unroll
  for (int n = 0; n < kHeadDim / 8; ++n) {
    // Columns 8 n + 2 pair + {0, 1}: chunk n, bytes 4 pair within it.
    *reinterpret_cast<std::uint32_t*>(staging + chunk_offset(group, n) + 4 * pair) =
        pack_bf16(acc[n][0] * scale_row0, acc[n][1] * scale_row0);
    *reinterpret_cast<std::uint32_t*>(staging + chunk_offset(group + 8, n) + 4 * pair) =
        pack_bf16(acc[n][2] * scale_row1, acc[n][3] * scale_row1);
  }
  __syncwarp();
  constexpr int kChunksPerRow = kHeadDim / kChunk;
#pragma unroll
  for (int index = lane; index < kWarpRows * kChunksPerRow; index += kWarpSize) {
    const int r = index / kChunksPerRow;
    const int c = index % kChunksPerRow;
    if (first_row + r < seq) {
      *reinterpret_cast<uint4*>(dst + static_cast<std::int64_t>(first_row + r) * row_stride + c * kChunk) =
          *reinterpret_cast<const uint4*>(staging + chunk_offset(r, c));
    }
  }
}

// store_warp_rows_staged through the warp's own 16 rows of a token tile (rows kPitch apart).
template <int kHeadDim>
__device__ __forceinline__ void store_warp_rows(const float (&acc)[kHeadDim / 8][4], float scale_row0, float scale_row1,
                                                std::uint16_t* staging, std::uint16_t* dst, std::int64_t row_stride,
                                                int first_row, int seq) {
  store_warp_rows_staged<kHeadDim>(
      acc, scale_row0, scale_row1, reinterpret_cast<unsigned char*>(staging),
      [](int r, int c) { return (r * kPitch<kHeadDim> + c * kChunk) * 2; }, dst, row_stride, first_row, seq);
}

}  // namespace adamant::kernels::cuda::flash_detail
