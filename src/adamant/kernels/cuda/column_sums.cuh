#pragma once
// The block layout of the column-sum kernels (column_sums.h): a block of
// kColumnThreads x kRowLanes threads, thread (t, w) on columns of its own and on every
// kRowLanes-th row of the block's slice from row w, so that a warp reads a contiguous
// run of each row; the row loop and launch sequence those kernels share. Only for *.cu files.
#include <cuda_runtime.h>

#include <cstdint>

#include "adamant/kernels/cuda/column_sums.h"
#include "adamant/kernels/cuda_launch.h"

namespace adamant::kernels::cuda::column_sums_detail {

constexpr int kColumnThreads = 32;  // one warp across adjacent columns: coalesced rows
constexpr int kRowLanes = 8;        // warps per block, each on every kRowLanes-th row of the slice
constexpr int kBlockThreads = kColumnThreads * kRowLanes;
// sum_columns_of_rows: a thread's columns (one 16-byte load of bf16) and its block's.
constexpr int kVectorColumns = 8;
constexpr int kVectorBlockColumns = kColumnThreads * kVectorColumns;

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

// The row loop of a kernel that sums the columns of bf16 rows [rows, cols] (cols a multiple
// of 8, 16-byte aligned): block (x, y) takes kVectorBlockColumns columns of the rows of
// slice y, a thread 8 columns of every kRowLanes-th row. `row_group(at)` returns the 8
// values from element `at` as 4 words of two bf16 each (a kernel that writes them returns
// them as stored, so that the sums are those of its output). kUnroll: rows in flight.
template <int kUnroll, typename RowGroup>
__device__ __forceinline__ void sum_columns_of_rows(std::int64_t rows, std::int64_t cols, std::int64_t rows_per_slice,
                                                    float* partials, RowGroup row_group) {
  const std::int64_t block_first_col = static_cast<std::int64_t>(blockIdx.x) * kVectorBlockColumns;
  const std::int64_t first_col = block_first_col + threadIdx.x * kVectorColumns;
  const auto [begin, end] = slice_rows(rows, rows_per_slice);
  float sum[kVectorColumns] = {};
  if (first_col < cols) {
#pragma unroll kUnroll
    for (std::int64_t r = begin + threadIdx.y; r < end; r += kRowLanes) {
      const uint4 v = row_group(r * cols + first_col);
      const std::uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        sum[2 * i] += __uint_as_float(words[i] << 16);
        sum[2 * i + 1] += __uint_as_float(words[i] & 0xffff0000u);
      }
    }
  }
  write_block_column_sums(sum, block_first_col, cols, partials + static_cast<std::int64_t>(blockIdx.y) * cols);
}

// The column sums of [rows, out.columns] by a kernel that writes its slices' partial sums:
// `launch(grid, block, rows_per_slice, partials)` launches it on `stream` (partials: the
// sums themselves when there is one slice), then the slices' partials are added up.
// block_columns: the columns of one of its blocks; target_blocks as plan_column_slices.
template <typename Launch>
cudaError_t launch_column_slices(std::int64_t rows, std::int64_t block_columns, std::int64_t target_blocks,
                                 const ColumnSumsOut& out, cudaStream_t stream, Launch launch) {
  const launchers::ColumnSlices plan = launchers::plan_column_slices(rows, out.columns, block_columns, target_blocks,
                                                                     out.scratch == nullptr ? 0 : out.scratch_floats);
  const dim3 block(kColumnThreads, kRowLanes);
  const dim3 grid(static_cast<unsigned>(plan.column_blocks), static_cast<unsigned>(plan.slices));
  launch(grid, block, plan.rows_per_slice, plan.slices == 1 ? out.sums : out.scratch);
  const cudaError_t status = cudaGetLastError();
  if (status != cudaSuccess) return status;
  return launchers::add_column_slices(out.scratch, plan.slices, out.columns, out.sums, stream);
}

}  // namespace adamant::kernels::cuda::column_sums_detail
