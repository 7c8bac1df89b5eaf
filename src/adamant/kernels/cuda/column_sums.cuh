#pragma once
// The block layout of the column-sum kernels (column_sums.h): a block of
// kColumnThreads x kRowLanes threads, thread (t, w) on columns of its own and on every
// kRowLanes-th row of the block's slice from row w, so that a warp reads a contiguous
// run of each row. Only for *.cu files.
#include <cuda_runtime.h>

#include <cstdint>

namespace adamant::kernels::cuda::column_sums_detail {

constexpr int kColumnThreads = 32;  // one warp across adjacent columns: coalesced rows
constexpr int kRowLanes = 8;        // warps per block, each on every kRowLanes-th row of the slice
constexpr int kBlockThreads = kColumnThreads * kRowLanes;

// Writes the block's column sums to `partials` (its slice's row of partial sums, cols
// wide): each thread holds the sums of kWidth adjacent columns from first_col over its
// row lane; the lanes' sums are added in lane order. Every thread of the block calls it.
template <int kWidth>
__device__ __forceinline__ void write_block_column_sums(const float (&sum)[kWidth], std::int64_t block_first_col,
                                                        std::int64_t cols, float* partials) {
  constexpr int kBlockColumns = kColumnThreads * kWidth;
  __shared__ float lane_sums[kRowLanes][kBlockColumns];
#pragma unroll
  for (int i = 0; i < kWidth; ++i) lane_sums[threadIdx.y][threadIdx.x * kWidth + i] = sum[i];
  __syncthreads();
  // Thread t of the block adds columns t, t + kBlockThreads, ... of the tile over the lanes.
  for (int column = static_cast<int>(threadIdx.y * kColumnThreads + threadIdx.x); column < kBlockColumns;
       column += kBlockThreads) {
    const std::int64_t col = block_first_col + column;
    if (col >= cols) continue;
    float total = 0.0f;
#pragma unroll
    for (int lane = 0; lane < kRowLanes; ++lane) total += lane_sums[lane][column];
    partials[col] = total;
  }
}

// The rows [begin, end) of the block's slice (blockIdx.y).
struct SliceRows {
  std::int64_t begin;
  std::int64_t end;
};
__device__ __forceinline__ SliceRows slice_rows(std::int64_t rows, std::int64_t rows_per_slice) {
  const std::int64_t begin = static_cast<std::int64_t>(blockIdx.y) * rows_per_slice;
  return {begin, begin + rows_per_slice < rows ? begin + rows_per_slice : rows};
}

}  // namespace adamant::kernels::cuda::column_sums_detail
