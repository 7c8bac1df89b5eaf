// Softmax cross-entropy over the vocabulary or a tensor-parallel slice of it (one
// block per row, online max and sum in one pass; for a slice, its statistics, or its
// gradient from the whole vocabulary's log-sum-exp), the combination of the slices'
// statistics, and the column sums of the linear layers' bias gradients. Launchers declared in classifier_launchers.h.
#include <cstdint>

#include "adamant/kernels/cuda/classifier_launchers.h"
#include "adamant/kernels/cuda/device_common.cuh"

namespace adamant::kernels::cuda::launchers {

namespace {

// ---- softmax cross-entropy ----

// 1024 threads: a 50304-wide row is 12576 float4 groups, about 12 per thread, and
// rows are few per chunk, so each block should cover a row with as many loads in
// flight as possible.
constexpr int kRowThreads = 1024;
constexpr int kRowWarps = kRowThreads / 32;

// Running softmax statistics: the max seen so far and the sum of exp(x - max).
struct MaxSum {
  float max;
  float sum;
};

__device__ __forceinline__ MaxSum combine(MaxSum a, MaxSum b) {
  const float max = fmaxf(a.max, b.max);
  if (max == -INFINITY) return a;  // both empty: exp(-inf - -inf) would be NaN
  return {max, a.sum * expf(a.max - max) + b.sum * expf(b.max - max)};
}

// Adds four values with one rescale of the running sum.
__device__ __forceinline__ void accumulate4(MaxSum& state, float x0, float x1, float x2, float x3) {
  const float local = fmaxf(fmaxf(x0, x1), fmaxf(x2, x3));
  if (local > state.max) {
    state.sum *= expf(state.max - local);  // 0 * exp(-inf) = 0 on the first values
    state.max = local;
  }
  state.sum += (expf(x0 - state.max) + expf(x1 - state.max)) + (expf(x2 - state.max) + expf(x3 - state.max));
}

__device__ __forceinline__ void accumulate1(MaxSum& state, float x) {
  if (x > state.max) {
    state.sum *= expf(state.max - x);
    state.max = x;
  }
  state.sum += expf(x - state.max);
}

__device__ __forceinline__ MaxSum warp_reduce(MaxSum value) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) {
    const MaxSum other{__shfl_down_sync(0xffffffffu, value.max, offset),
                       __shfl_down_sync(0xffffffffu, value.sum, offset)};
    value = combine(value, other);
  }
  return value;
}

// The block's total in a fixed order, returned to every thread.
__device__ MaxSum block_reduce(MaxSum value) {
  __shared__ MaxSum warp_totals[kRowWarps];
  __shared__ MaxSum total;
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  value = warp_reduce(value);
  if (lane == 0) warp_totals[warp] = value;
  __syncthreads();
  if (warp == 0) {
    value = lane < kRowWarps ? warp_totals[lane] : MaxSum{-INFINITY, 0.0f};
    value = warp_reduce(value);
    if (lane == 0) total = value;
  }
  __syncthreads();
  return total;
}

// grad_scale * (softmax - onehot) of one element, as the CPU reference: e * (scale / sum) - scale at the target.
__device__ __forceinline__ float gradient_of(float x, std::int64_t index, MaxSum stats, float factor, float grad_scale,
                                             std::int64_t target) {
  const float g = expf(x - stats.max) * factor;
  return index == target ? g - grad_scale : g;
}

// What the row kernel reduces a row to before its gradient pass.
enum class RowReduction : std::uint8_t {
  loss,         // losses[r] = logsumexp - the target's logit; NaN when the target is outside the row
  slice_stats,  // slice_lse[r] = logsumexp, target_logit[r] = the target's logit, 0 outside the row
  given_lse,    // none: the gradient takes lse[r], the whole vocabulary's, as its max with a sum of 1
};

// One launch's operands. The row holds columns [vocab_start, vocab_start + vocab) of the
// vocabulary that targets index; the pointers a mode does not use may be null.
struct RowOperands {
  float* logits;
  const std::int32_t* targets;
  std::int64_t vocab;
  std::int64_t vocab_start;
  float grad_scale;
  float* losses;
  float* slice_lse;
  float* target_logit;
  const float* lse;
};

template <bool kVectorized, RowReduction kReduction, CrossEntropyGradient kGradient>
__global__ void __launch_bounds__(kRowThreads) cross_entropy_rows_kernel(RowOperands operands) {
  const std::int64_t row = blockIdx.x;
  const std::int64_t vocab = operands.vocab;
  const float grad_scale = operands.grad_scale;
  float* row_logits = operands.logits + row * vocab;
  const std::int64_t target = static_cast<std::int64_t>(operands.targets[row]) - operands.vocab_start;
  const bool target_in_row = target >= 0 && target < vocab;
  const std::int64_t one_hot_index = target_in_row ? target : -1;
  const std::int64_t groups = vocab / detail::kLanes;

  MaxSum stats{0.0f, 1.0f};
  if constexpr (kReduction == RowReduction::given_lse) {
    stats.max = operands.lse[row];  // exp(x - lse) / 1: the softmax over the whole vocabulary
  } else {
    // Read before block_reduce's barriers; the gradient overwrites the row only after them.
    const float target_logit = threadIdx.x == 0 && target_in_row ? row_logits[target] : 0.0f;
    MaxSum state{-INFINITY, 0.0f};
    if constexpr (kVectorized) {
      const auto* vectors = reinterpret_cast<const float4*>(row_logits);
      for (std::int64_t g = threadIdx.x; g < groups; g += kRowThreads) {
        const float4 v = vectors[g];
        accumulate4(state, v.x, v.y, v.z, v.w);
      }
    } else {
      for (std::int64_t i = threadIdx.x; i < vocab; i += kRowThreads) accumulate1(state, row_logits[i]);
    }
    stats = block_reduce(state);
    if (threadIdx.x == 0) {
      const float row_lse = logf(stats.sum) + stats.max;
      if constexpr (kReduction == RowReduction::loss) {
        operands.losses[row] = target_in_row ? row_lse - target_logit : NAN;
      } else {
        operands.slice_lse[row] = row_lse;
        operands.target_logit[row] = target_logit;
      }
    }
  }
  if constexpr (kGradient == CrossEntropyGradient::f32_in_place) {
    const float factor = grad_scale / stats.sum;
    // Each thread rewrites exactly the elements it reads: no ordering needed.
    if constexpr (kVectorized) {
      auto* vectors = reinterpret_cast<float4*>(row_logits);
      for (std::int64_t g = threadIdx.x; g < groups; g += kRowThreads) {
        float4 v = vectors[g];
        const std::int64_t i = g * detail::kLanes;
        v.x = gradient_of(v.x, i, stats, factor, grad_scale, one_hot_index);
        v.y = gradient_of(v.y, i + 1, stats, factor, grad_scale, one_hot_index);
        v.z = gradient_of(v.z, i + 2, stats, factor, grad_scale, one_hot_index);
        v.w = gradient_of(v.w, i + 3, stats, factor, grad_scale, one_hot_index);
        vectors[g] = v;
      }
    } else {
      for (std::int64_t i = threadIdx.x; i < vocab; i += kRowThreads) {
        row_logits[i] = gradient_of(row_logits[i], i, stats, factor, grad_scale, one_hot_index);
      }
    }
  } else if constexpr (kGradient == CrossEntropyGradient::bf16_in_row) {
    const float factor = grad_scale / stats.sum;
    // bf16 element i lands on bytes [2i, 2i + 2) of the row, inside fp32 element i / 2.
    // The row is walked in tiles [t, t + T): all reads of a tile, a barrier, then its
    // writes, which reach fp32 elements below (t + T) / 2 <= t + T only, all read by
    // then; later tiles read at t + T and beyond, which no write has touched.
    auto* row_gradient = reinterpret_cast<std::uint16_t*>(row_logits);
    if constexpr (kVectorized) {
      const auto* vectors = reinterpret_cast<const float4*>(row_logits);
      for (std::int64_t tile = 0; tile < groups; tile += kRowThreads) {
        const std::int64_t g = tile + threadIdx.x;
        float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (g < groups) v = vectors[g];
        __syncthreads();
        if (g < groups) {
          const std::int64_t i = g * detail::kLanes;
          const ushort4 out =
              make_ushort4(detail::f32_to_bf16_bits(gradient_of(v.x, i, stats, factor, grad_scale, one_hot_index)),
                           detail::f32_to_bf16_bits(gradient_of(v.y, i + 1, stats, factor, grad_scale, one_hot_index)),
                           detail::f32_to_bf16_bits(gradient_of(v.z, i + 2, stats, factor, grad_scale, one_hot_index)),
                           detail::f32_to_bf16_bits(gradient_of(v.w, i + 3, stats, factor, grad_scale, one_hot_index)));
          *reinterpret_cast<ushort4*>(row_gradient + i) = out;
        }
      }
    } else {
      for (std::int64_t tile = 0; tile < vocab; tile += kRowThreads) {
        const std::int64_t i = tile + threadIdx.x;
        const float x = i < vocab ? row_logits[i] : 0.0f;
        __syncthreads();
        if (i < vocab) {
          row_gradient[i] = detail::f32_to_bf16_bits(gradient_of(x, i, stats, factor, grad_scale, one_hot_index));
        }
      }
    }
  }
}

template <RowReduction kReduction, CrossEntropyGradient kGradient>
cudaError_t launch_rows(const RowOperands& operands, std::int64_t rows, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  if (rows < 0 || rows > 0x7fffffff || operands.vocab <= 0) return cudaErrorInvalidValue;
  // float4 rows need every row start 16-byte aligned: an aligned base and vocab % 4 == 0.
  const bool vectorized =
      operands.vocab % detail::kLanes == 0 && reinterpret_cast<std::uintptr_t>(operands.logits) % 16 == 0;
  const dim3 grid(static_cast<unsigned>(rows));
  if (vectorized) {
    cross_entropy_rows_kernel<true, kReduction, kGradient><<<grid, kRowThreads, 0, stream>>>(operands);
  } else {
    cross_entropy_rows_kernel<false, kReduction, kGradient><<<grid, kRowThreads, 0, stream>>>(operands);
  }
  return cudaGetLastError();
}

// ---- combining the ranks' statistics ----

constexpr int kCombineThreads = 256;

// One thread per row, the ranks in order (as the CPU reference).
__global__ void __launch_bounds__(kCombineThreads)
    vocab_parallel_combine_kernel(const float* gathered, int tp_size, std::int64_t rows, float* losses, float* lse) {
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * kCombineThreads + threadIdx.x;
  if (row >= rows) return;
  float row_max = -INFINITY;
  for (int t = 0; t < tp_size; ++t) row_max = fmaxf(row_max, gathered[2 * t * rows + row]);
  float sum = 0.0f, target_logit = 0.0f;
  for (int t = 0; t < tp_size; ++t) {
    sum += expf(gathered[2 * t * rows + row] - row_max);
    target_logit += gathered[(2 * t + 1) * rows + row];
  }
  const float row_lse = logf(sum) + row_max;
  lse[row] = row_lse;
  losses[row] = row_lse - target_logit;
}

// ---- column sums ----

constexpr int kColumnsPerBlock = 32;  // one warp across 32 adjacent columns: coalesced rows
constexpr int kRowLanes = 8;          // warps per block, each on every 8th row of the slice
constexpr std::int64_t kMaxSlices = 256;

// The values of column threadIdx.x from the block's kRowLanes warps, added in warp order;
// the sum is warp 0's (the other warps get 0).
__device__ __forceinline__ float sum_over_row_lanes(float value) {
  __shared__ float lane_values[kRowLanes][kColumnsPerBlock];
  lane_values[threadIdx.y][threadIdx.x] = value;
  __syncthreads();
  float total = 0.0f;
  if (threadIdx.y == 0) {
#pragma unroll
    for (int lane = 0; lane < kRowLanes; ++lane) total += lane_values[lane][threadIdx.x];
  }
  return total;
}

// out[slice, j] = sum of x[i, j] over the rows i of the slice (blockIdx.y).
template <DType kInput>
__global__ void __launch_bounds__(kColumnsPerBlock* kRowLanes)
    column_slice_sums_kernel(const void* input, std::int64_t rows, std::int64_t cols, std::int64_t rows_per_slice,
                             float* out) {
  const auto* x = static_cast<const detail::Storage<kInput>*>(input);
  const std::int64_t col = static_cast<std::int64_t>(blockIdx.x) * kColumnsPerBlock + threadIdx.x;
  const std::int64_t begin = static_cast<std::int64_t>(blockIdx.y) * rows_per_slice;
  const std::int64_t end = begin + rows_per_slice < rows ? begin + rows_per_slice : rows;
  float sum = 0.0f;
  if (col < cols) {
    for (std::int64_t r = begin + threadIdx.y; r < end; r += kRowLanes)
      sum += detail::to_f32<kInput>(x[r * cols + col]);
  }
  const float total = sum_over_row_lanes(sum);
  if (threadIdx.y == 0 && col < cols) out[static_cast<std::int64_t>(blockIdx.y) * cols + col] = total;
}

// column_slice_sums_kernel for bf16 rows of a multiple of 8 columns, 16-byte aligned: a
// thread sums 8 adjacent columns from one 16-byte load per row (a warp reads 512
// contiguous bytes of a row), the block's warps take every kRowLanes-th row of the slice,
// and the warps' sums are added in warp order.
constexpr int kVectorColumns = 8;
constexpr int kVectorColumnsPerBlock = kColumnsPerBlock * kVectorColumns;

__global__ void __launch_bounds__(kColumnsPerBlock* kRowLanes)
    column_slice_sums_bf16x8_kernel(const std::uint16_t* x, std::int64_t rows, std::int64_t cols,
                                    std::int64_t rows_per_slice, float* out) {
  const std::int64_t first_col =
      static_cast<std::int64_t>(blockIdx.x) * kVectorColumnsPerBlock + threadIdx.x * kVectorColumns;
  const std::int64_t begin = static_cast<std::int64_t>(blockIdx.y) * rows_per_slice;
  const std::int64_t end = begin + rows_per_slice < rows ? begin + rows_per_slice : rows;
  float sum[kVectorColumns] = {};
  if (first_col < cols) {
#pragma unroll 4
    for (std::int64_t r = begin + threadIdx.y; r < end; r += kRowLanes) {
      const uint4 v = *reinterpret_cast<const uint4*>(x + r * cols + first_col);
      const std::uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        sum[2 * i] += __uint_as_float(words[i] << 16);
        sum[2 * i + 1] += __uint_as_float(words[i] & 0xffff0000u);
      }
    }
  }
  __shared__ float lane_sums[kRowLanes][kVectorColumnsPerBlock];
#pragma unroll
  for (int i = 0; i < kVectorColumns; ++i) lane_sums[threadIdx.y][threadIdx.x * kVectorColumns + i] = sum[i];
  __syncthreads();
  // Thread t of the block adds column t of the tile over the warps, in warp order.
  const int column = static_cast<int>(threadIdx.y * kColumnsPerBlock + threadIdx.x);
  const std::int64_t col = static_cast<std::int64_t>(blockIdx.x) * kVectorColumnsPerBlock + column;
  if (col < cols) {
    float total = 0.0f;
#pragma unroll
    for (int lane = 0; lane < kRowLanes; ++lane) total += lane_sums[lane][column];
    out[static_cast<std::int64_t>(blockIdx.y) * cols + col] = total;
  }
}

// sums[j] = the slices' partial sums of column j added in slice order: warp w of a block adds
// slices w, w + kRowLanes, ... of its 32 columns (independent loads, so many are in flight),
// then the warps' totals are added in warp order.
__global__ void __launch_bounds__(kColumnsPerBlock* kRowLanes)
    add_slices_kernel(const float* partials, std::int64_t slices, std::int64_t cols, float* sums) {
  const std::int64_t col = static_cast<std::int64_t>(blockIdx.x) * kColumnsPerBlock + threadIdx.x;
  float total = 0.0f;
  if (col < cols) {
#pragma unroll 4
    for (std::int64_t s = threadIdx.y; s < slices; s += kRowLanes) total += partials[s * cols + col];
  }
  const float sum = sum_over_row_lanes(total);
  if (threadIdx.y == 0 && col < cols) sums[col] = sum;
}

// Slices of the rows for `column_blocks` blocks across the columns: about kTargetBlocks blocks
// in all (enough loads in flight to keep the memory busy however narrow the matrix), at least
// kMinRowsPerSlice rows each, at most kMaxSlices, and as many as the scratch holds.
constexpr std::int64_t kTargetBlocks = 512;
constexpr std::int64_t kMinRowsPerSlice = 32;

std::int64_t slice_count(std::int64_t rows, std::int64_t cols, std::int64_t column_blocks, const float* scratch,
                         std::int64_t scratch_floats) {
  std::int64_t slices = (kTargetBlocks + column_blocks - 1) / column_blocks;
  const std::int64_t by_rows = (rows + kMinRowsPerSlice - 1) / kMinRowsPerSlice;
  if (slices > by_rows) slices = by_rows;
  if (slices > kMaxSlices) slices = kMaxSlices;
  if (scratch == nullptr || slices > scratch_floats / cols) slices = scratch_floats / cols;
  if (scratch == nullptr || slices < 2) slices = 1;
  return slices;
}

template <DType kInput>
cudaError_t launch_column_sums(const void* x, std::int64_t rows, std::int64_t cols, float* scratch,
                               std::int64_t scratch_floats, float* sums, cudaStream_t stream) {
  const bool vectorized =
      kInput == DType::bf16 && cols % kVectorColumns == 0 && reinterpret_cast<std::uintptr_t>(x) % 16 == 0;
  const std::int64_t column_blocks = vectorized ? (cols + kVectorColumnsPerBlock - 1) / kVectorColumnsPerBlock
                                                : (cols + kColumnsPerBlock - 1) / kColumnsPerBlock;
  const std::int64_t slices = slice_count(rows, cols, column_blocks, scratch, scratch_floats);
  const std::int64_t rows_per_slice = rows > 0 ? (rows + slices - 1) / slices : 1;
  const dim3 block(kColumnsPerBlock, kRowLanes);
  const dim3 grid(static_cast<unsigned>(column_blocks), static_cast<unsigned>(slices));
  float* slice_out = slices == 1 ? sums : scratch;  // one slice: the sums directly
  if (vectorized) {
    column_slice_sums_bf16x8_kernel<<<grid, block, 0, stream>>>(static_cast<const std::uint16_t*>(x), rows, cols,
                                                                rows_per_slice, slice_out);
  } else {
    column_slice_sums_kernel<kInput><<<grid, block, 0, stream>>>(x, rows, cols, rows_per_slice, slice_out);
  }
  cudaError_t status = cudaGetLastError();
  if (status != cudaSuccess || slices == 1) return status;
  add_slices_kernel<<<static_cast<unsigned>((cols + kColumnsPerBlock - 1) / kColumnsPerBlock), block, 0, stream>>>(
      scratch, slices, cols, sums);
  return cudaGetLastError();
}

}  // namespace

cudaError_t softmax_cross_entropy(float* logits, const std::int32_t* targets, float* losses, std::int64_t rows,
                                  std::int64_t vocab, CrossEntropyGradient gradient, float grad_scale,
                                  cudaStream_t stream) {
  const RowOperands operands{logits, targets, vocab, 0, grad_scale, losses, nullptr, nullptr, nullptr};
  switch (gradient) {
    case CrossEntropyGradient::none:
      return launch_rows<RowReduction::loss, CrossEntropyGradient::none>(operands, rows, stream);
    case CrossEntropyGradient::f32_in_place:
      return launch_rows<RowReduction::loss, CrossEntropyGradient::f32_in_place>(operands, rows, stream);
    case CrossEntropyGradient::bf16_in_row:
      return launch_rows<RowReduction::loss, CrossEntropyGradient::bf16_in_row>(operands, rows, stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t vocab_slice_statistics(float* logits, const std::int32_t* targets, std::int64_t vocab_start,
                                   float* slice_lse, float* target_logit, std::int64_t rows, std::int64_t vocab,
                                   cudaStream_t stream) {
  const RowOperands operands{logits, targets, vocab, vocab_start, 1.0f, nullptr, slice_lse, target_logit, nullptr};
  return launch_rows<RowReduction::slice_stats, CrossEntropyGradient::none>(operands, rows, stream);
}

cudaError_t vocab_slice_gradient(float* logits, const std::int32_t* targets, std::int64_t vocab_start, const float* lse,
                                 std::int64_t rows, std::int64_t vocab, CrossEntropyGradient gradient, float grad_scale,
                                 cudaStream_t stream) {
  const RowOperands operands{logits, targets, vocab, vocab_start, grad_scale, nullptr, nullptr, nullptr, lse};
  switch (gradient) {
    case CrossEntropyGradient::f32_in_place:
      return launch_rows<RowReduction::given_lse, CrossEntropyGradient::f32_in_place>(operands, rows, stream);
    case CrossEntropyGradient::bf16_in_row:
      return launch_rows<RowReduction::given_lse, CrossEntropyGradient::bf16_in_row>(operands, rows, stream);
    case CrossEntropyGradient::none:
      break;  // nothing to compute
  }
  return cudaErrorInvalidValue;
}

cudaError_t vocab_parallel_combine(const float* gathered, int tp_size, std::int64_t rows, float* losses, float* lse,
                                   cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  if (rows < 0 || tp_size <= 0) return cudaErrorInvalidValue;
  const std::int64_t blocks = (rows + kCombineThreads - 1) / kCombineThreads;
  if (blocks > 0x7fffffff) return cudaErrorInvalidValue;
  vocab_parallel_combine_kernel<<<static_cast<unsigned>(blocks), kCombineThreads, 0, stream>>>(gathered, tp_size, rows,
                                                                                               losses, lse);
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
