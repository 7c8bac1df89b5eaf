#pragma once
// Warp-level building blocks of the flash attention kernels: the block's shape, the
// register fragments a warp holds of the warpgroup products (wgmma.cuh), and the staged
// store of a warp's rows of results. Only for *.cu files.
//
// A warp's accumulators and register operands are laid out as mma.m16n8k16's fragments,
// lane = 4 * group + pair (group 0..7, pair 0..3):
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
constexpr int kWarpRows = 16;                   // rows of the block's own tile a warp owns
constexpr int kBlockRows = kWarps * kWarpRows;  // queries (or keys) a block of two warpgroups owns

// Warps of a block that owns kRows rows, a warp per kWarpRows of them (the arrivals that
// release a stage, flash_attention_stages.cuh), and their threads: what a kernel's launch
// bounds promise and what launch_over_row_blocks launches.
template <int kRows>
constexpr int block_warps() {
  return kRows / kWarpRows;
}
template <int kRows>
constexpr int block_threads() {
  return block_warps<kRows>() * kWarpSize;
}
constexpr int kThreads = block_threads<kBlockRows>();
constexpr int kStreamRows = 64;  // keys (or queries) streamed through shared memory per step
constexpr int kChunk = 8;        // bf16 per 16-byte access
constexpr float kLog2E = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

using detail::shared_address;

// ---- fragments ----

// The A fragment made of two adjacent C tiles (columns 0..7 and 8..15).
__device__ __forceinline__ void a_from_c(std::uint32_t (&a)[4], const float (&left)[4], const float (&right)[4]) {
  a[0] = pack_bf16(left[0], left[1]);
  a[1] = pack_bf16(left[2], left[3]);
  a[2] = pack_bf16(right[0], right[1]);
  a[3] = pack_bf16(right[2], right[3]);
}

// D = rowsum(d_out o)'s terms over one 16-byte chunk of a row (eight bf16 of each), in
// order. Both makers of the backward's row statistics (the statistics kernel and the query
// pass) add a row's chunk sums in chunk order from zero, so they give the same bits.
__device__ __forceinline__ float chunk_dot(const uint4& o, const uint4& d_o) {
  const std::uint32_t o_words[4] = {o.x, o.y, o.z, o.w};
  const std::uint32_t d_o_words[4] = {d_o.x, d_o.y, d_o.z, d_o.w};
  float sum = 0.0f;
#pragma unroll
  for (int w = 0; w < 4; ++w) {
    sum = fmaf(__uint_as_float(o_words[w] << 16), __uint_as_float(d_o_words[w] << 16), sum);
    sum = fmaf(__uint_as_float(o_words[w] & 0xffff0000u), __uint_as_float(d_o_words[w] & 0xffff0000u), sum);
  }
  return sum;
}

// A row's record in BackwardOperands::statistics from its D and natural logsumexp:
// (D, logsumexp log2(e), D over the dropout's 1/(1-p), 0).
__device__ __forceinline__ float4 statistics_record(float d_value, float logsumexp, float inverse_keep_scale) {
  return make_float4(d_value, logsumexp * kLog2E, d_value * inverse_keep_scale, 0.0f);
}

// A warp's 16 rows of fp32 C fragments (kHeadDim / 8 n8 tiles, row `group` times
// scale_row0 and row `group + 8` times scale_row1) to bf16 global rows, staged through
// shared memory so that each lane writes whole 16-byte chunks: chunk c of staging row r
// (0..15) at staging + chunk_offset(r, c) bytes. Rows at or past `seq` are not written.
// With `column_sums`, also the sums of the kHeadDim columns over those rows as stored (bf16),
// each in row order, to column_sums[0, kHeadDim): a share of a bias gradient.
// The caller guarantees that nothing else reads or writes the staging rows meanwhile.
template <int kHeadDim, typename ChunkOffset>
__device__ __forceinline__ void store_warp_rows_staged(const float (&acc)[kHeadDim / 8][4], float scale_row0,
                                                       float scale_row1, unsigned char* staging,
                                                       ChunkOffset chunk_offset, std::uint16_t* dst,
                                                       std::int64_t row_stride, int first_row, int seq,
                                                       float* column_sums) {
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
  if (column_sums == nullptr) return;
  // Lane l sums columns 2 u and 2 u + 1 (u = l, l + 32, ...): word u % 4 of chunk u / 4 of each row.
  const int rows = seq - first_row < kWarpRows ? seq - first_row : kWarpRows;
#pragma unroll
  for (int unit = lane; unit < kHeadDim / 2; unit += kWarpSize) {
    float2 sums = make_float2(0.0f, 0.0f);
    for (int r = 0; r < rows; ++r) {
      const std::uint32_t word =
          *reinterpret_cast<const std::uint32_t*>(staging + chunk_offset(r, unit / 4) + 4 * (unit % 4));
      sums.x += detail::bf16_bits_to_f32(static_cast<std::uint16_t>(word & 0xffffu));
      sums.y += detail::bf16_bits_to_f32(static_cast<std::uint16_t>(word >> 16));
    }
    *reinterpret_cast<float2*>(column_sums + 2 * unit) = sums;
  }
}

}  // namespace adamant::kernels::cuda::flash_detail
