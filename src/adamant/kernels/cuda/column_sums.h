#pragma once
// Column sums of a row-major matrix, the bias gradients of the linear layers: plain
// launch functions (column_sums.cu) for linear_cuda.cpp and for the element-wise
// kernels that sum their own output's columns as they write it (pointwise_model.cu).
// Every sum is fp32 and made in a fixed order, so runs are bitwise repeatable: blocks
// sum slices of the rows into partial sums (column_sums.cuh), then one pass adds each
// column's partials in slice order.
#include <cuda_runtime.h>

#include <cstdint>

#include "adamant/core/dtype.h"

namespace adamant::kernels::cuda::launchers {

// sums[j] = sum over i of x[i, j] for x [rows, cols] (bf16 or fp32, contiguous): partial
// sums over slices of rows go to `scratch` (up to scratch_floats values; fewer slices when
// it is small), then one pass adds them up.
cudaError_t column_sums(const void* x, DType x_dtype, std::int64_t rows, std::int64_t cols, float* scratch,
                        std::int64_t scratch_floats, float* sums, cudaStream_t stream);

// How a kernel that sums columns cuts [rows, cols] among its blocks: block (x, y) takes
// `block_columns` columns from x * block_columns and the rows of slice y.
struct ColumnSlices {
  std::int64_t column_blocks = 1;
  std::int64_t slices = 1;
  std::int64_t rows_per_slice = 1;
};

// About `target_blocks` blocks in all (enough loads in flight to keep the memory busy
// however narrow the matrix), slices of at least 32 rows, at most 256 slices, and no more
// than `scratch_floats` partial sums (one slice, written straight to the sums, without scratch).
ColumnSlices plan_column_slices(std::int64_t rows, std::int64_t cols, std::int64_t block_columns,
                                std::int64_t target_blocks, std::int64_t scratch_floats);

// sums[j] = partials[0, j] + partials[1, j] + ... over `slices` rows of partials [slices,
// cols], in slice order. Nothing to do for one slice (its partials are the sums).
cudaError_t add_column_slices(const float* partials, std::int64_t slices, std::int64_t cols, float* sums,
                              cudaStream_t stream);

}  // namespace adamant::kernels::cuda::launchers
