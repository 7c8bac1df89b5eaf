// Layer normalisation forward on bf16 activations and weights (kernels/layernorm.h), fp32
// statistics, fused with the residual add of a dropped-out branch before it
// (kernels/residual_layernorm.h); the backward is in layernorm_backward.cu.
//
// One warp per row; lanes stride over the row in 8-element (16-byte) vectors when the row
// length and pointers allow. Without dropout the fused kernel holds rows of up to
// kHeldMaxVectors vectors a lane in registers, read once; longer rows, rows with dropout and
// the plain layernorm are read again for each pass (from L1 or L2).
#include <cstdint>
#include <type_traits>

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

// The Philox draws of a row of the fused kernels: its sample's index and the group of its
// first element in that sample (zeros without dropout).
struct RowDraws {
  std::uint64_t sample = 0;
  std::int64_t first_group = 0;
};
template <bool kDropout>
__device__ __forceinline__ RowDraws row_draws(const DropoutParams& params, std::uint64_t first_sample,
                                              std::int64_t first_row, std::int64_t row, std::int64_t rows_per_sample,
                                              std::int64_t cols) {
  RowDraws draws;
  if constexpr (kDropout) {
    const std::int64_t sample = (first_row + row) / rows_per_sample;
    draws.sample = first_sample + static_cast<std::uint64_t>(sample);
    draws.first_group = (first_row + row - sample * rows_per_sample) * (cols / 4);
  }
  return draws;
}

// v += dropout(b) for the vector at column c, the dropped branch rounded as the dropout kernel
// stores it; the sum is stored at `residual` and v becomes it as stored. Returns the stored words.
template <bool kDropout>
__device__ __forceinline__ uint4 add_dropped_branch(float (&v)[kVectorWidth], float (&b)[kVectorWidth],
                                                    const DropoutParams& params, const RowDraws& draws, std::int64_t c,
                                                    std::uint16_t* residual) {
  if constexpr (kDropout) {
    drop_vector(params, draws.sample, static_cast<std::uint64_t>(draws.first_group + c / 4), b);
    round_to_bf16(b);
  }
#pragma unroll
  for (int i = 0; i < kVectorWidth; ++i) v[i] += b[i];
  const uint4 stored = store_packed_bf16(residual, v);
  unpack_bf16(stored, v);
  return stored;
}

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
    const RowDraws draws = row_draws<kDropout>(params, first_sample, first_row, row, rows_per_sample, cols);
    std::uint16_t* residual_row = residual + row * cols;
    float sum = 0.0f;
    for (std::int64_t c = static_cast<std::int64_t>(lane) * kVectorWidth; c < cols; c += kWarp * kVectorWidth) {
      float v[kVectorWidth];
      float b[kVectorWidth];
      load_bf16<kVectorWidth>(x + row * cols + c, v);
      load_bf16<kVectorWidth>(branch + row * cols + c, b);
      add_dropped_branch<kDropout>(v, b, params, draws, c, residual_row + c);  // v: the sum as stored
#pragma unroll
      for (int i = 0; i < kVectorWidth; ++i) sum += v[i];
    }
    normalize_row<kVectorWidth>(residual_row, sum, weight, bias, epsilon, out + row * cols, mean, rstd, row, cols,
                                lane);
  }
}

// The fused kernel without dropout on rows of at most kHeldMaxVectors 16-byte vectors a lane
// (kHeldMaxVectors * 256 columns): lane l holds vectors l, l + 32, ... of the row's sum as
// stored (bf16), loaded with all of the lane's x and branch vectors at once, and the three
// passes run over the registers. The sums are taken in residual_layernorm_forward_kernel's
// order: the same bits. With dropout, the draws' registers leave too few warps a
// multiprocessor to hide them at long rows, and the kernel above is as fast or faster
// (BENCHMARKS.md, "The fused residual-layernorm forward holding rows").
constexpr int kHeldMaxVectors = 8;
// Blocks a multiprocessor that the registers of the held row and its loads allow.
template <int kVectors>
constexpr int held_blocks_per_multiprocessor() {
  return kVectors <= 4 ? 4 : 2;
}

// Calls f(k, c) for each vector k the lane holds of a row of `cols` (c: its first column).
template <int kVectors, typename F>
__device__ __forceinline__ void for_each_held_vector(int lane, std::int64_t cols, F&& f) {
#pragma unroll
  for (int k = 0; k < kVectors; ++k) {
    const std::int64_t c = static_cast<std::int64_t>(lane) * kVectorWidth + k * kWarp * kVectorWidth;
    if (c < cols) f(k, c);
  }
}

template <int kVectors>
__global__ void __launch_bounds__(kThreads, held_blocks_per_multiprocessor<kVectors>())
    residual_layernorm_forward_held_kernel(const std::uint16_t* x, const std::uint16_t* branch, std::uint16_t* residual,
                                           const std::uint16_t* weight, const std::uint16_t* bias, float epsilon,
                                           std::uint16_t* out, float* mean, float* rstd, std::int64_t rows,
                                           std::int64_t cols) {
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const int warp = static_cast<int>(threadIdx.x) / kWarp;
  const float cols_count = static_cast<float>(cols);
  const DropoutParams no_dropout{};
  const RowDraws no_draws{};
  for (std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * kWarpsPerBlock + warp; row < rows;
       row += static_cast<std::int64_t>(gridDim.x) * kWarpsPerBlock) {
    const std::int64_t row_start = row * cols;
    uint4 held[kVectors] = {};
    uint4 branch_words[kVectors] = {};
    for_each_held_vector<kVectors>(lane, cols, [&](int k, std::int64_t c) {
      held[k] = *reinterpret_cast<const uint4*>(x + row_start + c);
      branch_words[k] = *reinterpret_cast<const uint4*>(branch + row_start + c);
    });
    float sum = 0.0f;
    for_each_held_vector<kVectors>(lane, cols, [&](int k, std::int64_t c) {
      float v[kVectorWidth];
      float b[kVectorWidth];
      unpack_bf16(held[k], v);
      unpack_bf16(branch_words[k], b);
      held[k] = add_dropped_branch<false>(v, b, no_dropout, no_draws, c, residual + row_start + c);  // as stored
#pragma unroll
      for (int i = 0; i < kVectorWidth; ++i) sum += v[i];
    });
    const float row_mean = warp_sum(sum) / cols_count;
    float squares = 0.0f;
    for_each_held_vector<kVectors>(lane, cols, [&](int k, std::int64_t) {
      float v[kVectorWidth];
      unpack_bf16(held[k], v);
#pragma unroll
      for (int i = 0; i < kVectorWidth; ++i) {
        const float centered = v[i] - row_mean;
        squares += centered * centered;
      }
    });
    const float row_rstd = 1.0f / sqrtf(warp_sum(squares) / cols_count + epsilon);
    for_each_held_vector<kVectors>(lane, cols, [&](int k, std::int64_t c) {
      float v[kVectorWidth];
      float w[kVectorWidth];
      float b[kVectorWidth];
      unpack_bf16(held[k], v);
      load_bf16<kVectorWidth>(weight + c, w);
      load_bf16<kVectorWidth>(bias + c, b);
#pragma unroll
      for (int i = 0; i < kVectorWidth; ++i) v[i] = (v[i] - row_mean) * row_rstd * w[i] + b[i];
      store_bf16<kVectorWidth>(out + row_start + c, v);
    });
    if (lane == 0) {
      mean[row] = row_mean;
      rstd[row] = row_rstd;
    }
  }
}

// Launches the held kernel with the fewest vectors a lane that hold a row of `cols`; false
// (nothing launched) for rows longer than kHeldMaxVectors vectors a lane.
bool launch_held(const std::uint16_t* x, const std::uint16_t* branch, std::uint16_t* residual,
                 const std::uint16_t* weight, const std::uint16_t* bias, float epsilon, std::uint16_t* out, float* mean,
                 float* rstd, std::int64_t rows, std::int64_t cols, const PointwiseLaunch& launch) {
  const std::int64_t vectors = (cols + kWarp * kVectorWidth - 1) / (kWarp * kVectorWidth);
  auto run = [&](auto held) {
    constexpr int kVectors = decltype(held)::value;
    residual_layernorm_forward_held_kernel<kVectors>
        <<<row_grid(rows, launch, held_blocks_per_multiprocessor<kVectors>()), kThreads, 0, stream_of(launch)>>>(
            x, branch, residual, weight, bias, epsilon, out, mean, rstd, rows, cols);
    return true;
  };
  if (vectors <= 3) return run(std::integral_constant<int, 3>{});  // GPT-3 126M: 768 columns
  if (vectors <= 4) return run(std::integral_constant<int, 4>{});
  if (vectors <= 6) return run(std::integral_constant<int, 6>{});
  if (vectors <= kHeldMaxVectors) return run(std::integral_constant<int, kHeldMaxVectors>{});
  return false;
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
  const bool held = !dropout && launchers::launch_held(x, branch, residual, weight, bias, epsilon, out, mean, rstd,
                                                       rows, cols, launch);
  if (held) return cudaGetLastError();
  auto* kernel = dropout ? launchers::residual_layernorm_forward_kernel<true>
                         : launchers::residual_layernorm_forward_kernel<false>;
  const int grid = launchers::row_grid(
      rows, launch, dropout ? launchers::kDropoutBlocksPerMultiprocessor : launchers::kBlocksPerMultiprocessor);
  kernel<<<grid, launchers::kThreads, 0, launchers::stream_of(launch)>>>(
      x, branch, residual, weight, bias, epsilon, out, mean, rstd, rows, cols, rows_per_sample, params);
  return cudaGetLastError();
}

}  // namespace adamant::kernels::cuda
