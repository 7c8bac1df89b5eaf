// Column sums (column_sums.h): the bias gradients of the linear layers.
#include "adamant/kernels/cuda/column_sums.cuh"
#include "adamant/kernels/cuda/column_sums.h"
#include "adamant/kernels/cuda/device_common.cuh"

namespace adamant::kernels::cuda::launchers {

namespace {

using column_sums_detail::kBlockThreads;
using column_sums_detail::kColumnThreads;
using column_sums_detail::kRowLanes;
using column_sums_detail::kVectorBlockColumns;
using column_sums_detail::kVectorColumns;
using column_sums_detail::launch_column_slices;
using column_sums_detail::slice_rows;
using column_sums_detail::sum_columns_of_rows;
using column_sums_detail::write_block_column_sums;

// partials[slice, j] = sum of x[i, j] over the rows i of the slice (blockIdx.y), one column a thread.
template <DType kInput>
__global__ void __launch_bounds__(kBlockThreads)
    column_slice_sums_kernel(const void* input, std::int64_t rows, std::int64_t cols, std::int64_t rows_per_slice,
                             float* partials) {
  const auto* x = static_cast<const detail::Storage<kInput>*>(input);
  const std::int64_t block_first_col = static_cast<std::int64_t>(blockIdx.x) * kColumnThreads;
  const std::int64_t col = block_first_col + threadIdx.x;
  const auto [begin, end] = slice_rows(rows, rows_per_slice);
  float sum[1] = {0.0f};
  if (col < cols) {
    for (std::int64_t r = begin + threadIdx.y; r < end; r += kRowLanes)
      sum[0] += detail::to_f32<kInput>(x[r * cols + col]);
  }
  write_block_column_sums(sum, block_first_col, cols, partials + static_cast<std::int64_t>(blockIdx.y) * cols);
}

// column_slice_sums_kernel for bf16 rows of a multiple of 8 columns, 16-byte aligned: a
// thread sums 8 adjacent columns from one 16-byte load per row (a warp reads 512
// contiguous bytes of a row).
__global__ void __launch_bounds__(kBlockThreads)
    column_slice_sums_bf16x8_kernel(const std::uint16_t* x, std::int64_t rows, std::int64_t cols,
                                    std::int64_t rows_per_slice, float* partials) {
  sum_columns_of_rows<4>(rows, cols, rows_per_slice, partials,
                         [&](std::int64_t at) { return *reinterpret_cast<const uint4*>(x + at); });
}

// sums[j] = the slices' partial sums of column j added in slice order: lane w adds slices
// w, w + kRowLanes, ... of its 32 columns (independent loads, so many are in flight), then
// the lanes' totals are added in lane order.
__global__ void __launch_bounds__(kBlockThreads)
    add_slices_kernel(const float* partials, std::int64_t slices, std::int64_t cols, float* sums) {
  const std::int64_t block_first_col = static_cast<std::int64_t>(blockIdx.x) * kColumnThreads;
  const std::int64_t col = block_first_col + threadIdx.x;
  float total[1] = {0.0f};
  if (col < cols) {
#pragma unroll 4
    for (std::int64_t s = threadIdx.y; s < slices; s += kRowLanes) total[0] += partials[s * cols + col];
  }
  write_block_column_sums(total, block_first_col, cols, sums);
}

template <DType kInput>
cudaError_t launch_column_sums(const void* x, std::int64_t rows, std::int64_t cols, float* scratch,
                               std::int64_t scratch_floats, float* sums, cudaStream_t stream) {
  const bool vectorized =
      kInput == DType::bf16 && cols % kVectorColumns == 0 && reinterpret_cast<std::uintptr_t>(x) % 16 == 0;
  constexpr std::int64_t kTargetBlocks = 512;
  return launch_column_slices(
      rows, vectorized ? kVectorBlockColumns : kColumnThreads, kTargetBlocks, {sums, cols, scratch, scratch_floats},
      stream, [&](dim3 grid, dim3 block, std::int64_t rows_per_slice, float* partials) {
        if (vectorized) {
          column_slice_sums_bf16x8_kernel<<<grid, block, 0, stream>>>(static_cast<const std::uint16_t*>(x), rows, cols,
                                                                      rows_per_slice, partials);
        } else {
          column_slice_sums_kernel<kInput><<<grid, block, 0, stream>>>(x, rows, cols, rows_per_slice, partials);
        }
      });
}

}  // namespace

ColumnSlices plan_column_slices(std::int64_t rows, std::int64_t cols, std::int64_t block_columns,
                                std::int64_t target_blocks, std::int64_t scratch_floats) {
  constexpr std::int64_t kMinRowsPerSlice = 32;
  constexpr std::int64_t kMaxSlices = 256;
  ColumnSlices plan;
  plan.column_blocks = (cols + block_columns - 1) / block_columns;
  std::int64_t slices = (target_blocks + plan.column_blocks - 1) / plan.column_blocks;
  const std::int64_t by_rows = (rows + kMinRowsPerSlice - 1) / kMinRowsPerSlice;
  if (slices > by_rows) slices = by_rows;
  if (slices > kMaxSlices) slices = kMaxSlices;
  if (cols > 0 && slices > scratch_floats / cols) slices = scratch_floats / cols;
  plan.slices = slices < 2 ? 1 : slices;
  plan.rows_per_slice = rows > 0 ? (rows + plan.slices - 1) / plan.slices : 1;
  return plan;
}

cudaError_t add_column_slices(const float* partials, std::int64_t slices, std::int64_t cols, float* sums,
                              cudaStream_t stream) {
  if (slices <= 1) return cudaSuccess;
  const dim3 block(kColumnThreads, kRowLanes);
  add_slices_kernel<<<static_cast<unsigned>((cols + kColumnThreads - 1) / kColumnThreads), block, 0, stream>>>(
      partials, slices, cols, sums);
  return cudaGetLastError();
}

cudaError_t column_sums(const void* x, DType x_dtype, std::int64_t rows, std::int64_t cols, float* scratch,
                        std::int64_t scratch_floats, float* sums, cudaStream_t stream) {
  if (cols == 0) return cudaSuccess;
  if (rows < 0 || cols < 0) return cudaErrorInvalidValue;
  switch (x_dtype) {
    case DType::bf16:
      return launch_column_sums<DType::bf16>(x, rows, cols, scratch, scratch_floats, sums, stream);
    case DType::f32:
      return launch_column_sums<DType::f32>(x, rows, cols, scratch, scratch_floats, sums, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace adamant::kernels::cuda::launchers
