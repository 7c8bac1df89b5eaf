// Layer normalisation forward and backward on bf16 activations and weights
// (kernels/layernorm.h), fp32 statistics and reductions, the forward fused with the
// residual add of a dropped-out branch before it, and the backward with that branch's
// gradient (kernels/residual_layernorm.h).
//
// Forward: one warp per row; lanes stride over the row in 8-element (16-byte) vectors
// when the row length and pointers allow, and the row is re-read from L1 for each pass
// instead of being held in registers.
//
// Backward: d_weight and d_bias are column sums over all rows, computed without atomics
// so the result is bit-identical on every run. Rows of 16-byte vectors take one kernel, a
// block per chunk of rows: each warp sums its rows' reductions, then the block's threads
// take the chunk column-wise, adding d_x and summing each column's terms over the chunk
// (32 column-threads x 8 row-threads, the 8 row sums added in a fixed order) into a
// workspace; with a branch below the layernorm, they also write the branch's gradient
// (the dropout of d_x as stored) and sum its bias's gradient as a third column sum. Other
// rows (no branch there) take the warp-per-row d_x kernel and then a column-sum kernel
// that reads the rows again. A last pass adds the chunk sums of each column in a fixed
// order. The chunking depends only on the shape.
#include <cstdint>

#include "adamant/kernels/cuda/model_launchers_pointwise.h"
#include "adamant/kernels/cuda/pointwise_model_device.cuh"
#include "adamant/kernels/cuda/pointwise_model_philox.cuh"

namespace adamant::kernels::cuda::launchers {

namespace {

using pointwise_detail::dropout_value;
using pointwise_detail::first_sample_of;
using pointwise_detail::kVectorWidth;
using pointwise_detail::kWarp;
using pointwise_detail::load_bf16;
using pointwise_detail::pack_bf16_vector;
using pointwise_detail::store_bf16;
using pointwise_detail::store_packed_bf16;
using pointwise_detail::unpack_bf16;
using pointwise_detail::warp_sum;

constexpr int kThreads = 256;
constexpr int kWarpsPerBlock = kThreads / kWarp;
// The row kernels' launch bounds hold them to the registers that let this many blocks stay
// resident, so a grid capped at this many blocks a multiprocessor runs in one wave.
constexpr int kBlocksPerMultiprocessor = 6;
// The fused residual and layernorm with dropout holds a Philox draw more: fewer blocks, no spills.
constexpr int kDropoutBlocksPerMultiprocessor = 5;

// Column-sum chunking: about kTargetChunks chunks of kMinRowsPerChunk to kMaxRowsPerChunk
// rows (more chunks past kTargetChunks * kMaxRowsPerChunk rows). The fused backward runs a
// block per chunk: enough blocks to fill the GPU, few enough rows that a block's rows are
// still in cache when it reads them a second time.
constexpr std::int64_t kTargetChunks = 1024;
constexpr std::int64_t kMinRowsPerChunk = 16;
constexpr std::int64_t kMaxRowsPerChunk = 64;
// The fused backward holds a thread's 8 columns' two or three sums besides the row it works
// on (and a Philox draw) in the registers that let four blocks stay resident: the GPT-3
// shapes' thousand chunks then run in two waves.
constexpr int kBackwardBlocksPerMultiprocessor = 4;

struct Chunking {
  std::int64_t rows_per_chunk;
  std::int64_t chunks;
};

Chunking chunking_for(std::int64_t rows) {
  std::int64_t rows_per_chunk = (rows + kTargetChunks - 1) / kTargetChunks;
  if (rows_per_chunk < kMinRowsPerChunk) rows_per_chunk = kMinRowsPerChunk;
  if (rows_per_chunk > kMaxRowsPerChunk) rows_per_chunk = kMaxRowsPerChunk;
  return {rows_per_chunk, (rows + rows_per_chunk - 1) / rows_per_chunk};
}

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

// dropout() of 8 values of one sample from its element 4 * first_group on (two Philox
// groups), in place.
__device__ __forceinline__ void drop_vector(const DropoutParams& params, std::uint64_t sample,
                                            std::uint64_t first_group, float (&v)[kVectorWidth]) {
#pragma unroll
  for (int g = 0; g < 2; ++g) {
    const PhiloxWords bits = pointwise_detail::dropout_bits(params.seed, sample, params.site, first_group + g);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      v[4 * g + k] = dropout_value(v[4 * g + k], bits.word[k], params.probability, params.keep_scale);
    }
  }
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

// The two reductions of a row's d_x: mean(dxhat) and mean(dxhat xhat), dxhat = d_out *
// weight, summed by a warp whose lanes stride over the row.
struct RowGradMeans {
  float dxhat;
  float dxhat_xhat;
};

template <int kWidth>
__device__ __forceinline__ RowGradMeans row_grad_means(const std::uint16_t* x_row, const std::uint16_t* dy_row,
                                                       const std::uint16_t* weight, float row_mean, float row_rstd,
                                                       std::int64_t cols, int lane) {
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
  const float inv_cols = 1.0f / static_cast<float>(cols);
  return {warp_sum(dxhat_sum) * inv_cols, warp_sum(dxhat_xhat_sum) * inv_cols};
}

// dx += rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat xhat)) for kWidth elements of a row.
template <int kWidth>
__device__ __forceinline__ void add_input_grad(const float (&v)[kWidth], const float (&dy)[kWidth],
                                               const float (&w)[kWidth], float row_mean, float row_rstd,
                                               const RowGradMeans& means, float (&dx)[kWidth]) {
#pragma unroll
  for (int i = 0; i < kWidth; ++i) {
    const float xhat = (v[i] - row_mean) * row_rstd;
    dx[i] += row_rstd * (dy[i] * w[i] - means.dxhat - xhat * means.dxhat_xhat);
  }
}

// d_x += rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)), dxhat = d_out * weight,
// for rows of any length (layernorm_backward_kernel takes rows of 16-byte vectors).
__global__ void __launch_bounds__(kThreads, kBlocksPerMultiprocessor)
    layernorm_backward_input_kernel(const std::uint16_t* d_out, const std::uint16_t* x, const std::uint16_t* weight,
                                    const float* mean, const float* rstd, std::uint16_t* d_x, std::int64_t rows,
                                    std::int64_t cols) {
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const int warp = static_cast<int>(threadIdx.x) / kWarp;
  for (std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * kWarpsPerBlock + warp; row < rows;
       row += static_cast<std::int64_t>(gridDim.x) * kWarpsPerBlock) {
    const std::uint16_t* x_row = x + row * cols;
    const std::uint16_t* dy_row = d_out + row * cols;
    const float row_mean = mean[row];
    const float row_rstd = rstd[row];
    const RowGradMeans means = row_grad_means<1>(x_row, dy_row, weight, row_mean, row_rstd, cols, lane);
    std::uint16_t* dx_row = d_x + row * cols;
    for (std::int64_t c = lane; c < cols; c += kWarp) {
      float v[1];
      float dy[1];
      float w[1];
      float dx[1];
      load_bf16<1>(x_row + c, v);
      load_bf16<1>(dy_row + c, dy);
      load_bf16<1>(weight + c, w);
      load_bf16<1>(dx_row + c, dx);
      add_input_grad<1>(v, dy, w, row_mean, row_rstd, means, dx);
      store_bf16<1>(dx_row + c, dx);
    }
  }
}

constexpr int kRowThreads = kThreads / kWarp;

// The end of a column tile of the chunk sums: thread (tx = threadIdx.x % 32, ty =
// threadIdx.x / 32) holds its rows' kSums sums of columns tile + kWidth tx, ...; the 8
// row-threads' sums are added in ty order into the chunk's partials (workspace: sum s's
// partials [chunks, cols] from s * chunks * cols: d_weight's, d_bias's, a branch's
// d_bias's). Ends with the block synchronised, so that `staged` may take the next tile.
template <int kWidth, int kSums>
__device__ __forceinline__ void write_chunk_partials(const float (&sums)[kSums][kWidth],
                                                     float (*staged)[kRowThreads][kWarp * kWidth], std::int64_t tile,
                                                     std::int64_t chunk, std::int64_t cols, std::int64_t chunks,
                                                     float* workspace) {
  constexpr int kTileCols = kWarp * kWidth;
  const int tx = static_cast<int>(threadIdx.x) % kWarp;
  const int ty = static_cast<int>(threadIdx.x) / kWarp;
#pragma unroll
  for (int s = 0; s < kSums; ++s) {
#pragma unroll
    for (int i = 0; i < kWidth; ++i) staged[s][ty][tx * kWidth + i] = sums[s][i];
  }
  __syncthreads();
  for (int k = static_cast<int>(threadIdx.x); k < kTileCols; k += kThreads) {
    const std::int64_t col = tile + k;
    if (col >= cols) continue;
#pragma unroll
    for (int s = 0; s < kSums; ++s) {
      float total = 0.0f;
#pragma unroll
      for (int t = 0; t < kRowThreads; ++t) total += staged[s][t][k];
      workspace[(s * chunks + chunk) * cols + col] = total;
    }
  }
  __syncthreads();
}

// The whole backward of a chunk of rows with 16-byte vectors (cols % 8 == 0, aligned), one
// block a chunk. Phase 1, a warp a row: the row's mean(dxhat) and mean(dxhat xhat)
// (row_grad_means). Phase 2, by tiles of 256 columns: thread (tx = threadIdx.x % 32, ty =
// threadIdx.x / 32) takes the 8 columns tile + 8 tx of rows ty, ty + 8, ... of the chunk,
// adds their d_x (add_input_grad) and sums their d_weight and d_bias terms; the 8
// row-thread sums are added in ty order into the chunk's partials (write_chunk_partials).
// The rows are read twice, the second time from cache, instead of a second kernel reading
// them from memory again. With kDropout the branch's gradient dropout(d_x) is written too,
// from d_x as stored (the dropout kernel's values), and with kBranchSums its column sums
// (or d_x's, without dropout) are a third partial sum: the dropout or column-sum pass that
// would read d_x back is not needed.
template <bool kDropout, bool kBranchSums>
__global__ void __launch_bounds__(kThreads, kBackwardBlocksPerMultiprocessor)
    layernorm_backward_kernel(const std::uint16_t* d_out, const std::uint16_t* x, const std::uint16_t* weight,
                              const float* mean, const float* rstd, std::uint16_t* d_x, float* workspace,
                              std::int64_t rows, std::int64_t cols, std::int64_t rows_per_chunk, std::int64_t chunks,
                              LayernormBranchGrad branch) {
  constexpr int kSums = kBranchSums ? 3 : 2;
  constexpr int kTileCols = kWarp * kVectorWidth;
  // Per row of the chunk: mean, rstd, mean(dxhat), mean(dxhat xhat).
  __shared__ float row_terms[kMaxRowsPerChunk][4];
  // With dropout, per row: its sample and the Philox group of its first element in it.
  __shared__ std::uint64_t row_draws[kDropout ? kMaxRowsPerChunk : 1][2];
  __shared__ float staged[kSums][kRowThreads][kTileCols];
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const int warp = static_cast<int>(threadIdx.x) / kWarp;
  const std::int64_t chunk = blockIdx.x;
  const std::int64_t row_begin = chunk * rows_per_chunk;
  const int chunk_rows = static_cast<int>(rows - row_begin < rows_per_chunk ? rows - row_begin : rows_per_chunk);
  for (int r = warp; r < chunk_rows; r += kWarpsPerBlock) {
    const std::int64_t row = row_begin + r;
    const float row_mean = mean[row];
    const float row_rstd = rstd[row];
    const RowGradMeans means =
        row_grad_means<kVectorWidth>(x + row * cols, d_out + row * cols, weight, row_mean, row_rstd, cols, lane);
    if (lane == 0) {
      row_terms[r][0] = row_mean;
      row_terms[r][1] = row_rstd;
      row_terms[r][2] = means.dxhat;
      row_terms[r][3] = means.dxhat_xhat;
      if constexpr (kDropout) {
        const std::int64_t batch_row = static_cast<std::int64_t>(branch.dropout.first_element) / cols + row;
        const std::int64_t sample = batch_row / branch.rows_per_sample;
        row_draws[r][0] = first_sample_of(branch.dropout) + static_cast<std::uint64_t>(sample);
        row_draws[r][1] = static_cast<std::uint64_t>((batch_row - sample * branch.rows_per_sample) * (cols / 4));
      }
    }
  }
  __syncthreads();
  const int tx = lane;
  const int ty = warp;
  for (std::int64_t tile = 0; tile < cols; tile += kTileCols) {
    const std::int64_t c = tile + static_cast<std::int64_t>(tx) * kVectorWidth;
    float sums[kSums][kVectorWidth] = {};
    if (c < cols) {
      for (int r = ty; r < chunk_rows; r += kRowThreads) {
        const std::int64_t at = (row_begin + r) * cols + c;
        const float row_mean = row_terms[r][0];
        const float row_rstd = row_terms[r][1];
        float v[kVectorWidth];
        float dy[kVectorWidth];
        float w[kVectorWidth];
        float dx[kVectorWidth];
        load_bf16<kVectorWidth>(x + at, v);
        load_bf16<kVectorWidth>(d_out + at, dy);
        load_bf16<kVectorWidth>(weight + c, w);
        load_bf16<kVectorWidth>(d_x + at, dx);
        add_input_grad<kVectorWidth>(v, dy, w, row_mean, row_rstd, {row_terms[r][2], row_terms[r][3]}, dx);
        const uint4 stored = store_packed_bf16(d_x + at, dx);
#pragma unroll
        for (int i = 0; i < kVectorWidth; ++i) {
          sums[0][i] += dy[i] * ((v[i] - row_mean) * row_rstd);
          sums[1][i] += dy[i];
        }
        if constexpr (kDropout || kBranchSums) {
          float g[kVectorWidth];  // the branch's gradient as stored
          unpack_bf16(stored, g);
          if constexpr (kDropout) {
            drop_vector(branch.dropout, row_draws[r][0], row_draws[r][1] + static_cast<std::uint64_t>(c / 4), g);
            unpack_bf16(store_packed_bf16(branch.d_branch + at, g), g);
          }
          if constexpr (kBranchSums) {
#pragma unroll
            for (int i = 0; i < kVectorWidth; ++i) sums[kSums - 1][i] += g[i];
          }
        }
      }
    }
    write_chunk_partials<kVectorWidth, kSums>(sums, staged, tile, chunk, cols, chunks, workspace);
  }
}

// The column sums of the scalar rows' parameter gradients. Block (column tile blockIdx.x,
// chunk blockIdx.y): thread (tx = threadIdx.x % 32, ty = threadIdx.x / 32) sums rows
// chunk_begin + ty, + 8, ... of column tile + tx; the 8 row-thread sums are then added in
// ty order (write_chunk_partials).
__global__ void __launch_bounds__(kThreads)
    layernorm_param_partials_kernel(const std::uint16_t* d_out, const std::uint16_t* x, const float* mean,
                                    const float* rstd, float* workspace, std::int64_t rows, std::int64_t cols,
                                    std::int64_t rows_per_chunk, std::int64_t chunks) {
  __shared__ float staged[2][kRowThreads][kWarp];
  const int tx = static_cast<int>(threadIdx.x) % kWarp;
  const int ty = static_cast<int>(threadIdx.x) / kWarp;
  const std::int64_t tile_begin = static_cast<std::int64_t>(blockIdx.x) * kWarp;
  const std::int64_t chunk = blockIdx.y;
  const std::int64_t row_begin = chunk * rows_per_chunk;
  const std::int64_t row_end = row_begin + rows_per_chunk < rows ? row_begin + rows_per_chunk : rows;
  const std::int64_t c = tile_begin + tx;
  float sums[2][1] = {};
  if (c < cols) {
    for (std::int64_t r = row_begin + ty; r < row_end; r += kRowThreads) {
      const float dy = detail::bf16_bits_to_f32(d_out[r * cols + c]);
      const float v = detail::bf16_bits_to_f32(x[r * cols + c]);
      sums[0][0] += dy * (v - mean[r]) * rstd[r];
      sums[1][0] += dy;
    }
  }
  write_chunk_partials<1, 2>(sums, staged, tile_begin, chunk, cols, chunks, workspace);
}

// The last pass, a block per kFinishColumns columns: column blockIdx.x * 4 + tx (tx =
// threadIdx.x % 4); row-thread ty = threadIdx.x / 4 adds chunks ty, ty + 128, ... of each
// of the kSums partial sums in order; then each of 8 threads adds 16 row-threads' sums in
// ty order, and the 8 group sums are added in order and written (overwriting) to the
// sum's output. A few columns and many row-threads a block: a thousand chunks of a few
// hundred columns spread over the GPU with all of a thread's loads in flight at once.
constexpr int kFinishThreads = 512;
constexpr int kFinishColumns = 4;
constexpr int kFinishRowThreads = kFinishThreads / kFinishColumns;
constexpr int kFinishGroups = 8;
constexpr int kMaxSums = 3;

struct FinishOutputs {
  float* sums[kMaxSums];  // d_weight, d_bias, then a branch's d_bias
};

template <int kSums>
__global__ void __launch_bounds__(kFinishThreads)
    layernorm_param_finish_kernel(const float* workspace, FinishOutputs outputs, std::int64_t cols,
                                  std::int64_t chunks) {
  constexpr int kGroupRows = kFinishRowThreads / kFinishGroups;
  __shared__ float staged[kSums][kFinishRowThreads][kFinishColumns];
  __shared__ float grouped[kSums][kFinishGroups][kFinishColumns];
  const int tx = static_cast<int>(threadIdx.x) % kFinishColumns;
  const int ty = static_cast<int>(threadIdx.x) / kFinishColumns;
  const std::int64_t col = static_cast<std::int64_t>(blockIdx.x) * kFinishColumns + tx;
  float sums[kSums] = {};
  if (col < cols) {
#pragma unroll 8
    for (std::int64_t chunk = ty; chunk < chunks; chunk += kFinishRowThreads) {
#pragma unroll
      for (int s = 0; s < kSums; ++s) sums[s] += workspace[(s * chunks + chunk) * cols + col];
    }
  }
#pragma unroll
  for (int s = 0; s < kSums; ++s) staged[s][ty][tx] = sums[s];
  __syncthreads();
  if (ty < kFinishGroups) {
#pragma unroll
    for (int s = 0; s < kSums; ++s) {
      float total = 0.0f;
#pragma unroll
      for (int t = 0; t < kGroupRows; ++t) total += staged[s][ty * kGroupRows + t][tx];
      grouped[s][ty][tx] = total;
    }
  }
  __syncthreads();
  if (ty != 0 || col >= cols) return;
#pragma unroll
  for (int s = 0; s < kSums; ++s) {
    float total = 0.0f;
#pragma unroll
    for (int g = 0; g < kFinishGroups; ++g) total += grouped[s][g][tx];
    outputs.sums[s][col] = total;
  }
}

int row_grid(std::int64_t rows, const PointwiseLaunch& launch,
             int blocks_per_multiprocessor = kBlocksPerMultiprocessor) {
  return pointwise_detail::capped_grid(rows, kWarpsPerBlock, launch.multiprocessors, blocks_per_multiprocessor);
}

bool use_vectors(std::int64_t cols, const PointwiseLaunch& launch) {
  return launch.vectorized && cols % kVectorWidth == 0;
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
  // chunking_for(r).chunks for every r <= rows is at most this: up to kTargetChunks chunks of
  // at least kMinRowsPerChunk rows where the chunks stay within kMaxRowsPerChunk rows, and
  // chunks of kMaxRowsPerChunk rows past that.
  std::int64_t chunks = (rows + kMaxRowsPerChunk - 1) / kMaxRowsPerChunk;
  if (rows <= kTargetChunks * kMaxRowsPerChunk) {
    const std::int64_t by_rows = (rows + kMinRowsPerChunk - 1) / kMinRowsPerChunk;
    chunks = by_rows < kTargetChunks ? by_rows : kTargetChunks;
  }
  return kMaxSums * chunks * cols;
}

cudaError_t layernorm_backward(const std::uint16_t* d_out, const std::uint16_t* x, const std::uint16_t* weight,
                               const float* mean, const float* rstd, std::uint16_t* d_x, float* d_weight, float* d_bias,
                               float* workspace, std::int64_t rows, std::int64_t cols, const PointwiseLaunch& launch,
                               const LayernormBranchGrad& branch) {
  if (cols <= 0) return cudaErrorInvalidValue;
  const bool vectors = use_vectors(cols, launch);
  if (branch.wanted() &&
      (!vectors || (branch.dropped() && (branch.d_branch == nullptr || branch.rows_per_sample <= 0 ||
                                         branch.dropout.first_element % static_cast<std::uint64_t>(cols) != 0)))) {
    return cudaErrorInvalidValue;
  }
  const FinishOutputs outputs{{d_weight, d_bias, branch.d_bias}};
  const int sums = branch.d_bias != nullptr ? 3 : 2;
  if (rows <= 0) {  // no rows: the column sums are zero
    for (int s = 0; s < sums; ++s) {
      const cudaError_t status =
          cudaMemsetAsync(outputs.sums[s], 0, static_cast<std::size_t>(cols) * sizeof(float), stream_of(launch));
      if (status != cudaSuccess) return status;
    }
    return cudaSuccess;
  }
  const Chunking chunking = chunking_for(rows);
  cudaError_t status = cudaSuccess;
  if (vectors) {
    auto* kernel = branch.dropped() ? (branch.d_bias != nullptr ? layernorm_backward_kernel<true, true>
                                                                : layernorm_backward_kernel<true, false>)
                                    : (branch.d_bias != nullptr ? layernorm_backward_kernel<false, true>
                                                                : layernorm_backward_kernel<false, false>);
    kernel<<<static_cast<unsigned>(chunking.chunks), kThreads, 0, stream_of(launch)>>>(
        d_out, x, weight, mean, rstd, d_x, workspace, rows, cols, chunking.rows_per_chunk, chunking.chunks, branch);
    status = cudaGetLastError();
  } else {  // scalar rows: d_x, then the column sums reading the rows again
    layernorm_backward_input_kernel<<<row_grid(rows, launch), kThreads, 0, stream_of(launch)>>>(d_out, x, weight, mean,
                                                                                                rstd, d_x, rows, cols);
    status = cudaGetLastError();
    if (status == cudaSuccess) {
      const dim3 grid(static_cast<unsigned>((cols + kWarp - 1) / kWarp), static_cast<unsigned>(chunking.chunks));
      layernorm_param_partials_kernel<<<grid, kThreads, 0, stream_of(launch)>>>(
          d_out, x, mean, rstd, workspace, rows, cols, chunking.rows_per_chunk, chunking.chunks);
      status = cudaGetLastError();
    }
  }
  if (status != cudaSuccess) return status;
  const auto finish_grid = static_cast<unsigned>((cols + kFinishColumns - 1) / kFinishColumns);
  auto* finish = sums == 3 ? layernorm_param_finish_kernel<3> : layernorm_param_finish_kernel<2>;
  finish<<<finish_grid, kFinishThreads, 0, stream_of(launch)>>>(workspace, outputs, cols, chunking.chunks);
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
