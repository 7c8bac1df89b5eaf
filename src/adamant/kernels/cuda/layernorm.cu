// Layer normalisation forward on bf16 activations and weights (kernels/layernorm.h), fp32
// statistics, fused with the residual add of a dropped-out branch before it
// (kernels/residual_layernorm.h); the backward is in layernorm_backward.cu.
//
// One warp per row; lanes stride over the row in 8-element (16-byte) vectors when the row
// length and pointers allow, and the row is re-read from L1 for each pass instead of being
// held in registers.
#include <cstdint>

#include "adamant/kernels/cuda/layernorm_rows.cuh"
#include "adamant/kernels/cuda/model_launchers_pointwise.h"
#include "adamant/kernels/cuda/pointwise_model_device.cuh"
#include "adamant/kernels/cuda/pointwise_model_philox.cuh"

namespace adamant::kernels::cuda::launchers {

namespace {

using namespace layernorm_rows;
using pointwise_detail::pack_bf16_vector;

// The fused residual and layernorm with dropout holds a Philox draw more: fewer blocks, no spills.
constexpr int kDropoutBlocksPerMultiprocessor = 5;

// Passes 2 and 3 of a warp's row, given its lanes' sums of the row's values (pass 1):
// the centred squares, then the normalised row; lane 0 writes the statistics. The row is
// read again for each pass (from L1 or L2) rather than held in registers.
template <int kWidth>
__device__ __forceinline__ void normalize_row(const std::uint16_t* x_row, float lane_sum, const std::uint16_t* weight,
                                              const std::uint16_t* bias, float epsilon, std::uint16_t* out_row,
                                              float* mean, float* rstd, std::int64_t row, std::int64_t cols, int lane) {
  const float cols_count = static_cast<float>(cols);
  const float row_mean = warp_sum(lane_sum) / cols_count;
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

// kWidth = 8 needs cols % 8 == 0 and 16-byte aligned rows; kWidth = 1 works for any shape.
template <int kWidth>
__global__ void __launch_bounds__(kThreads, kBlocksPerMultiprocessor)
    layernorm_forward_kernel(const std::uint16_t* x, const std::uint16_t* weight, const std::uint16_t* bias,
                             float epsilon, std::uint16_t* out, float* mean, float* rstd, std::int64_t rows,
                             std::int64_t cols) {
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const int warp = static_cast<int>(threadIdx.x) / kWarp;
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
    normalize_row<kWidth>(x_row, sum, weight, bias, epsilon, out + row * cols, mean, rstd, row, cols, lane);
  }
}

// Rounds v to bf16 as a store of it would, in place.
__device__ __forceinline__ void round_to_bf16(float (&v)[kVectorWidth]) { unpack_bf16(pack_bf16_vector(v), v); }

// residual = x + dropout(branch), then the layernorm of residual's rows, each warp a row:
// pass 1 writes the row's sums and the stream's new row, passes 2 and 3 read that row
// back. The values are those of the dropout, residual add and layernorm kernels: the
// dropped branch and the sum rounded to bf16 as those kernels store them, the row sums in
// layernorm_forward_kernel's order. Rows of 16-byte vectors inside one sample of
// rows_per_sample rows; a lane's vector is two whole Philox groups (dropout_bits).
template <bool kDropout>
__global__ void __launch_bounds__(kThreads, kDropout ? kDropoutBlocksPerMultiprocessor : kBlocksPerMultiprocessor)
    residual_layernorm_forward_kernel(const std::uint16_t* x, const std::uint16_t* branch, std::uint16_t* residual,
                                      const std::uint16_t* weight, const std::uint16_t* bias, float epsilon,
                                      std::uint16_t* out, float* mean, float* rstd, std::int64_t rows,
                                      std::int64_t cols, std::int64_t rows_per_sample, DropoutParams params) {
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const int warp = static_cast<int>(threadIdx.x) / kWarp;
  const std::int64_t first_row = static_cast<std::int64_t>(params.first_element) / cols;  // in the whole batch
  const std::uint64_t first_sample = kDropout ? first_sample_of(params) : 0;
  for (std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * kWarpsPerBlock + warp; row < rows;
       row += static_cast<std::int64_t>(gridDim.x) * kWarpsPerBlock) {
    // The row's sample and the Philox group of its first element in that sample.
    std::int64_t sample = 0;
    std::int64_t first_group = 0;
    if constexpr (kDropout) {
      sample = (first_row + row) / rows_per_sample;
      first_group = (first_row + row - sample * rows_per_sample) * (cols / 4);
    }
    std::uint16_t* residual_row = residual + row * cols;
    float sum = 0.0f;
    for (std::int64_t c = static_cast<std::int64_t>(lane) * kVectorWidth; c < cols; c += kWarp * kVectorWidth) {
      float v[kVectorWidth];
      float b[kVectorWidth];
      load_bf16<kVectorWidth>(x + row * cols + c, v);
      load_bf16<kVectorWidth>(branch + row * cols + c, b);
      if constexpr (kDropout) {
        drop_vector(params, first_sample + static_cast<std::uint64_t>(sample),
                    static_cast<std::uint64_t>(first_group + c / 4), b);
        round_to_bf16(b);
      }
#pragma unroll
      for (int i = 0; i < kVectorWidth; ++i) v[i] += b[i];
      unpack_bf16(store_packed_bf16(residual_row + c, v), v);  // the sum as stored
#pragma unroll
      for (int i = 0; i < kVectorWidth; ++i) sum += v[i];
    }
    normalize_row<kVectorWidth>(residual_row, sum, weight, bias, epsilon, out + row * cols, mean, rstd, row, cols,
                                lane);
  }
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

}  // namespace adamant::kernels::cuda::launchers

namespace adamant::kernels::cuda {

int residual_layernorm_forward(const std::uint16_t* x, const std::uint16_t* branch, std::uint16_t* residual,
                               const std::uint16_t* weight, const std::uint16_t* bias, float epsilon,
                               std::uint16_t* out, float* mean, float* rstd, std::int64_t rows, std::int64_t cols,
                               std::int64_t rows_per_sample, const DropoutParams& params, const CudaLaunch& launch) {
  if (rows <= 0) return cudaSuccess;
  if (cols <= 0 || cols % launchers::kVectorWidth != 0 || rows_per_sample <= 0 ||
      params.first_element % static_cast<std::uint64_t>(cols) != 0) {
    return cudaErrorInvalidValue;
  }
  const bool dropout = params.probability > 0.0f;
  auto* kernel = dropout ? launchers::residual_layernorm_forward_kernel<true>
                         : launchers::residual_layernorm_forward_kernel<false>;
  const int grid = launchers::row_grid(
      rows, launch, dropout ? launchers::kDropoutBlocksPerMultiprocessor : launchers::kBlocksPerMultiprocessor);
  kernel<<<grid, launchers::kThreads, 0, launchers::stream_of(launch)>>>(
      x, branch, residual, weight, bias, epsilon, out, mean, rstd, rows, cols, rows_per_sample, params);
  return cudaGetLastError();
}

}  // namespace adamant::kernels::cuda
