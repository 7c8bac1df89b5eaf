// Layer normalisation forward and backward on bf16 activations and weights
// (kernels/layernorm.h), fp32 statistics and reductions.
//
// Forward and the d_x part of backward: one warp per row; lanes stride over the
// row in 8-element (16-byte) vectors when the row length and pointers allow, and
// the row is re-read from L1 for each pass instead of being held in registers.
//
// d_weight and d_bias are column sums over all rows, computed without atomics so
// the result is bit-identical on every run: pass 1 sums each chunk of rows per
// column into a workspace (blocks of 32 column-threads x 8 row-threads, the 8
// row sums added in a fixed order), pass 2 adds the chunk sums of each column in
// chunk order. The chunking depends only on the shape.
#include <cstdint>

#include "adamant/kernels/cuda/model_launchers_pointwise.h"
#include "adamant/kernels/cuda/pointwise_model_device.cuh"

namespace adamant::kernels::cuda::launchers {

namespace {

using pointwise_detail::kVectorWidth;
using pointwise_detail::kWarp;
using pointwise_detail::load_bf16;
using pointwise_detail::store_bf16;
using pointwise_detail::warp_sum;

constexpr int kThreads = 256;
constexpr int kWarpsPerBlock = kThreads / kWarp;
// The row kernels' launch bounds hold them to the registers that let this many blocks stay
// resident, so a grid capped at this many blocks a multiprocessor runs in one wave.
constexpr int kBlocksPerMultiprocessor = 6;

// Column-sum chunking: at most kMaxChunks chunks of at least kMinRowsPerChunk rows.
constexpr std::int64_t kMaxChunks = 256;
constexpr std::int64_t kMinRowsPerChunk = 32;

struct Chunking {
  std::int64_t rows_per_chunk;
  std::int64_t chunks;
};

Chunking chunking_for(std::int64_t rows) {
  std::int64_t rows_per_chunk = (rows + kMaxChunks - 1) / kMaxChunks;
  if (rows_per_chunk < kMinRowsPerChunk) rows_per_chunk = kMinRowsPerChunk;
  return {rows_per_chunk, (rows + rows_per_chunk - 1) / rows_per_chunk};
}

// kWidth = 8 needs cols % 8 == 0 and 16-byte aligned rows; kWidth = 1 works for any shape.
template <int kWidth>
__global__ void __launch_bounds__(kThreads, kBlocksPerMultiprocessor)
    layernorm_forward_kernel(const std::uint16_t* x, const std::uint16_t* weight, const std::uint16_t* bias,
                             float epsilon, std::uint16_t* out, float* mean, float* rstd, std::int64_t rows,
                             std::int64_t cols) {
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const int warp = static_cast<int>(threadIdx.x) / kWarp;
  const float cols_count = static_cast<float>(cols);
  for (std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * kWarpsPerBlock + warp; row < rows;
       row += static_cast<std::int64_t>(gridDim.x) * kWarpsPerBlock) {
    const std::uint16_t* x_row = x + row * cols;
    float sum = 0.0f;
    for (std::int64_t c = static_cast<std::int64_t>(lane) * kWidth; c < cols; c += kWarp * kWidth) {
      float v[kWidth];
      load_bf16<kWidth>(x_row + c, v);
#pragma unroll
      for (int i = 0; i < kWidth; ++i) sum += v[i];
    }
    const float row_mean = warp_sum(sum) / cols_count;
    float squares = 0.0f;
    for (std::int64_t c = static_cast<std::int64_t>(lane) * kWidth; c < cols; c += kWarp * kWidth) {
      float v[kWidth];
      load_bf16<kWidth>(x_row + c, v);
#pragma unroll
      for (int i = 0; i < kWidth; ++i) {
        const float centered = v[i] - row_mean;
        squares += centered * centered;
      }
    }
    const float row_rstd = 1.0f / sqrtf(warp_sum(squares) / cols_count + epsilon);
    std::uint16_t* out_row = out + row * cols;
    for (std::int64_t c = static_cast<std::int64_t>(lane) * kWidth; c < cols; c += kWarp * kWidth) {
      float v[kWidth];
      float w[kWidth];
      float b[kWidth];
      load_bf16<kWidth>(x_row + c, v);
      load_bf16<kWidth>(weight + c, w);
      load_bf16<kWidth>(bias + c, b);
#pragma unroll
      for (int i = 0; i < kWidth; ++i) v[i] = (v[i] - row_mean) * row_rstd * w[i] + b[i];
      store_bf16<kWidth>(out_row + c, v);
    }
    if (lane == 0) {
      mean[row] = row_mean;
      rstd[row] = row_rstd;
    }
  }
}

// d_x += rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)), dxhat = d_out * weight.
template <int kWidth>
__global__ void __launch_bounds__(kThreads, kBlocksPerMultiprocessor)
    layernorm_backward_input_kernel(const std::uint16_t* d_out, const std::uint16_t* x, const std::uint16_t* weight,
                                    const float* mean, const float* rstd, std::uint16_t* d_x, std::int64_t rows,
                                    std::int64_t cols) {
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const int warp = static_cast<int>(threadIdx.x) / kWarp;
  const float inv_cols = 1.0f / static_cast<float>(cols);
  for (std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * kWarpsPerBlock + warp; row < rows;
       row += static_cast<std::int64_t>(gridDim.x) * kWarpsPerBlock) {
    const std::uint16_t* x_row = x + row * cols;
    const std::uint16_t* dy_row = d_out + row * cols;
    const float row_mean = mean[row];
    const float row_rstd = rstd[row];
    float dxhat_sum = 0.0f;
    float dxhat_xhat_sum = 0.0f;
    for (std::int64_t c = static_cast<std::int64_t>(lane) * kWidth; c < cols; c += kWarp * kWidth) {
      float v[kWidth];
      float dy[kWidth];
      float w[kWidth];
      load_bf16<kWidth>(x_row + c, v);
      load_bf16<kWidth>(dy_row + c, dy);
      load_bf16<kWidth>(weight + c, w);
#pragma unroll
      for (int i = 0; i < kWidth; ++i) {
        const float xhat = (v[i] - row_mean) * row_rstd;
        const float dxhat = dy[i] * w[i];
        dxhat_sum += dxhat;
        dxhat_xhat_sum += dxhat * xhat;
      }
    }
    const float dxhat_mean = warp_sum(dxhat_sum) * inv_cols;
    const float dxhat_xhat_mean = warp_sum(dxhat_xhat_sum) * inv_cols;
    std::uint16_t* dx_row = d_x + row * cols;
    for (std::int64_t c = static_cast<std::int64_t>(lane) * kWidth; c < cols; c += kWarp * kWidth) {
      float v[kWidth];
      float dy[kWidth];
      float w[kWidth];
      float dx[kWidth];
      load_bf16<kWidth>(x_row + c, v);
      load_bf16<kWidth>(dy_row + c, dy);
      load_bf16<kWidth>(weight + c, w);
      load_bf16<kWidth>(dx_row + c, dx);
#pragma unroll
      for (int i = 0; i < kWidth; ++i) {
        const float xhat = (v[i] - row_mean) * row_rstd;
        dx[i] += row_rstd * (dy[i] * w[i] - dxhat_mean - xhat * dxhat_xhat_mean);
      }
      store_bf16<kWidth>(dx_row + c, dx);
    }
  }
}

// Pass 1 of the parameter gradients. Block (column tile blockIdx.x, chunk blockIdx.y):
// thread (tx = threadIdx.x % 32, ty = threadIdx.x / 32) sums rows chunk_begin + ty,
// + 8, ... of columns [tile + tx * kWidth, + kWidth); the 8 row-thread sums are then
// added in ty order. workspace: d_weight sums [chunks, cols], then d_bias sums.
template <int kWidth>
__global__ void __launch_bounds__(kThreads)
    layernorm_param_partials_kernel(const std::uint16_t* d_out, const std::uint16_t* x, const float* mean,
                                    const float* rstd, float* workspace, std::int64_t rows, std::int64_t cols,
                                    std::int64_t rows_per_chunk, std::int64_t chunks) {
  constexpr int kRowThreads = kThreads / kWarp;
  constexpr int kTileCols = kWarp * kWidth;
  __shared__ float weight_sums[kRowThreads][kTileCols];
  __shared__ float bias_sums[kRowThreads][kTileCols];
  const int tx = static_cast<int>(threadIdx.x) % kWarp;
  const int ty = static_cast<int>(threadIdx.x) / kWarp;
  const std::int64_t tile_begin = static_cast<std::int64_t>(blockIdx.x) * kTileCols;
  const std::int64_t chunk = blockIdx.y;
  const std::int64_t row_begin = chunk * rows_per_chunk;
  const std::int64_t row_end = row_begin + rows_per_chunk < rows ? row_begin + rows_per_chunk : rows;
  const std::int64_t c = tile_begin + static_cast<std::int64_t>(tx) * kWidth;
  float dw[kWidth] = {};
  float db[kWidth] = {};
  if (c < cols) {  // with kWidth = 8, cols % 8 == 0: the whole vector is inside
    for (std::int64_t r = row_begin + ty; r < row_end; r += kRowThreads) {
      float dy[kWidth];
      float v[kWidth];
      load_bf16<kWidth>(d_out + r * cols + c, dy);
      load_bf16<kWidth>(x + r * cols + c, v);
      const float row_mean = mean[r];
      const float row_rstd = rstd[r];
#pragma unroll
      for (int i = 0; i < kWidth; ++i) {
        dw[i] += dy[i] * (v[i] - row_mean) * row_rstd;
        db[i] += dy[i];
      }
    }
  }
#pragma unroll
  for (int i = 0; i < kWidth; ++i) {
    weight_sums[ty][tx * kWidth + i] = dw[i];
    bias_sums[ty][tx * kWidth + i] = db[i];
  }
  __syncthreads();
  float* weight_partials = workspace;
  float* bias_partials = workspace + chunks * cols;
  for (int k = static_cast<int>(threadIdx.x); k < kTileCols; k += kThreads) {
    const std::int64_t col = tile_begin + k;
    if (col >= cols) continue;
    float weight_total = 0.0f;
    float bias_total = 0.0f;
#pragma unroll
    for (int t = 0; t < kRowThreads; ++t) {
      weight_total += weight_sums[t][k];
      bias_total += bias_sums[t][k];
    }
    weight_partials[chunk * cols + col] = weight_total;
    bias_partials[chunk * cols + col] = bias_total;
  }
}

// Pass 2: column blockIdx.x * 32 + tx; row-thread ty adds chunks ty, ty + 8, ... in
// order, then the 8 sums are added in ty order and written (overwriting).
__global__ void __launch_bounds__(kThreads)
    layernorm_param_finish_kernel(const float* workspace, float* d_weight, float* d_bias, std::int64_t cols,
                                  std::int64_t chunks) {
  constexpr int kRowThreads = kThreads / kWarp;
  __shared__ float weight_sums[kRowThreads][kWarp];
  __shared__ float bias_sums[kRowThreads][kWarp];
  const int tx = static_cast<int>(threadIdx.x) % kWarp;
  const int ty = static_cast<int>(threadIdx.x) / kWarp;
  const std::int64_t col = static_cast<std::int64_t>(blockIdx.x) * kWarp + tx;
  const float* weight_partials = workspace;
  const float* bias_partials = workspace + chunks * cols;
  float dw = 0.0f;
  float db = 0.0f;
  if (col < cols) {
    for (std::int64_t chunk = ty; chunk < chunks; chunk += kRowThreads) {
      dw += weight_partials[chunk * cols + col];
      db += bias_partials[chunk * cols + col];
    }
  }
  weight_sums[ty][tx] = dw;
  bias_sums[ty][tx] = db;
  __syncthreads();
  if (ty == 0 && col < cols) {
    float weight_total = 0.0f;
    float bias_total = 0.0f;
#pragma unroll
    for (int t = 0; t < kRowThreads; ++t) {
      weight_total += weight_sums[t][tx];
      bias_total += bias_sums[t][tx];
    }
    d_weight[col] = weight_total;
    d_bias[col] = bias_total;
  }
}

int row_grid(std::int64_t rows, const PointwiseLaunch& launch) {
  return pointwise_detail::capped_grid(rows, kWarpsPerBlock, launch.multiprocessors, kBlocksPerMultiprocessor);
}

bool use_vectors(std::int64_t cols, const PointwiseLaunch& launch) {
  return launch.vectorized && cols % kVectorWidth == 0;
}

template <int kWidth>
cudaError_t launch_param_partials(const std::uint16_t* d_out, const std::uint16_t* x, const float* mean,
                                  const float* rstd, float* workspace, std::int64_t rows, std::int64_t cols,
                                  const Chunking& chunking, cudaStream_t stream) {
  constexpr std::int64_t kTileCols = static_cast<std::int64_t>(kWarp) * kWidth;
  const dim3 grid(static_cast<unsigned>((cols + kTileCols - 1) / kTileCols), static_cast<unsigned>(chunking.chunks));
  layernorm_param_partials_kernel<kWidth><<<grid, kThreads, 0, stream>>>(d_out, x, mean, rstd, workspace, rows, cols,
                                                                         chunking.rows_per_chunk, chunking.chunks);
  return cudaGetLastError();
}

}  // namespace

cudaError_t layernorm_forward(const std::uint16_t* x, const std::uint16_t* weight, const std::uint16_t* bias,
                              float epsilon, std::uint16_t* out, float* mean, float* rstd, std::int64_t rows,
                              std::int64_t cols, const PointwiseLaunch& launch) {
  if (rows <= 0) return cudaSuccess;
  if (cols <= 0) return cudaErrorInvalidValue;
  auto* kernel = use_vectors(cols, launch) ? layernorm_forward_kernel<kVectorWidth> : layernorm_forward_kernel<1>;
  kernel<<<row_grid(rows, launch), kThreads, 0, stream_of(launch)>>>(x, weight, bias, epsilon, out, mean, rstd, rows,
                                                                     cols);
  return cudaGetLastError();
}

std::int64_t layernorm_backward_workspace_floats(std::int64_t rows, std::int64_t cols) {
  // chunking_for(r).chunks is at most both of these for every r <= rows.
  const std::int64_t by_rows = (rows + kMinRowsPerChunk - 1) / kMinRowsPerChunk;
  return 2 * (by_rows < kMaxChunks ? by_rows : kMaxChunks) * cols;
}

cudaError_t layernorm_backward(const std::uint16_t* d_out, const std::uint16_t* x, const std::uint16_t* weight,
                               const float* mean, const float* rstd, std::uint16_t* d_x, float* d_weight, float* d_bias,
                               float* workspace, std::int64_t rows, std::int64_t cols, const PointwiseLaunch& launch) {
  if (cols <= 0) return cudaErrorInvalidValue;
  if (rows <= 0) {  // no rows: the parameter gradients are zero
    cudaError_t status =
        cudaMemsetAsync(d_weight, 0, static_cast<std::size_t>(cols) * sizeof(float), stream_of(launch));
    if (status != cudaSuccess) return status;
    return cudaMemsetAsync(d_bias, 0, static_cast<std::size_t>(cols) * sizeof(float), stream_of(launch));
  }
  const bool vectors = use_vectors(cols, launch);
  auto* input_kernel = vectors ? layernorm_backward_input_kernel<kVectorWidth> : layernorm_backward_input_kernel<1>;
  input_kernel<<<row_grid(rows, launch), kThreads, 0, stream_of(launch)>>>(d_out, x, weight, mean, rstd, d_x, rows,
                                                                           cols);
  cudaError_t status = cudaGetLastError();
  if (status != cudaSuccess) return status;

  const Chunking chunking = chunking_for(rows);
  status = vectors ? launch_param_partials<kVectorWidth>(d_out, x, mean, rstd, workspace, rows, cols, chunking,
                                                         stream_of(launch))
                   : launch_param_partials<1>(d_out, x, mean, rstd, workspace, rows, cols, chunking, stream_of(launch));
  if (status != cudaSuccess) return status;
  const auto finish_grid = static_cast<unsigned>((cols + kWarp - 1) / kWarp);
  layernorm_param_finish_kernel<<<finish_grid, kThreads, 0, stream_of(launch)>>>(workspace, d_weight, d_bias, cols,
                                                                                 chunking.chunks);
  return cudaGetLastError();
}

}  // namespace adamant::kernels::cuda::launchers
