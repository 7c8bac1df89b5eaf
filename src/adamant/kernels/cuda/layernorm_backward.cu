// Layer normalisation backward on bf16 activations and weights (kernels/layernorm.h), fp32
// reductions, with the gradient of the residual branch below it (kernels/residual_layernorm.h).
//
// d_weight and d_bias are column sums over all rows, computed without atomics so the result
// is bit-identical on every run: each chunk of rows writes its column sums to a workspace,
// and a last pass adds the chunk sums of each column in a fixed order. The chunking
// depends only on the shape. Rows of 16-byte vectors take one kernel, a block per chunk:
// - up to kHeldMaxCols columns, the block holds a row at a time in registers and reads it
//   once (layernorm_backward_rows_kernel);
// - longer rows are read twice, a warp a row for the row's reductions, then column tiles
//   for d_x and the column sums (layernorm_backward_tiles_kernel).
// Both also write the branch's gradient below (the dropout of d_x as stored) and sum its
// bias's gradient as a third column sum. Other rows (no branch there) take the
// warp-per-row d_x kernel and then a column-sum kernel that reads the rows again.
#include <cstdint>

#include "adamant/kernels/cuda/layernorm_rows.cuh"
#include "adamant/kernels/cuda/model_launchers_pointwise.h"
#include "adamant/kernels/cuda/pointwise_model_device.cuh"
#include "adamant/kernels/cuda/pointwise_model_philox.cuh"

namespace adamant::kernels::cuda::launchers {

namespace {

using namespace layernorm_rows;
using pointwise_detail::store_f32;

// Column-sum chunking: about kTargetChunks chunks of kMinRowsPerChunk to kMaxRowsPerChunk
// rows (more chunks past kTargetChunks * kMaxRowsPerChunk rows). The fused backward runs a
// block per chunk: enough blocks to fill the GPU (GPT-3 1.3B's 8,192 rows make 1,024 chunks
// of 8), few enough rows that the tile kernel's rows are still in cache when it reads them
// a second time.
constexpr std::int64_t kTargetChunks = 1024;
constexpr std::int64_t kMinRowsPerChunk = 8;
constexpr std::int64_t kMaxRowsPerChunk = 64;
// The tile kernel holds a thread's 8 columns' two or three sums besides the row it works
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

// The two reductions of a row's d_x: mean(dxhat) and mean(dxhat xhat), dxhat = d_out *
// weight, summed by a warp whose lanes stride over the row.
struct RowGradMeans {
  float dxhat;
  float dxhat_xhat;
};

// Adds kWidth elements' terms of the two reductions, dxhat = d_out * weight and dxhat * xhat.
template <int kWidth>
__device__ __forceinline__ void add_reduction_terms(const float (&v)[kWidth], const float (&dy)[kWidth],
                                                    const float (&w)[kWidth], float row_mean, float row_rstd,
                                                    float& dxhat_sum, float& dxhat_xhat_sum) {
#pragma unroll
  for (int i = 0; i < kWidth; ++i) {
    const float xhat = (v[i] - row_mean) * row_rstd;
    const float dxhat = dy[i] * w[i];
    dxhat_sum += dxhat;
    dxhat_xhat_sum += dxhat * xhat;
  }
}

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
    add_reduction_terms<kWidth>(v, dy, w, row_mean, row_rstd, dxhat_sum, dxhat_xhat_sum);
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
// for rows of any length (the fused kernels take rows of 16-byte vectors).
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

// One 16-byte vector of a row once its reductions are known: d_x += the input gradient (stored),
// the d_weight and d_bias terms added to sums[0] and sums[1]; with kDropout the branch's
// gradient dropout(d_x as stored) written to branch.d_branch (its elements from 4 * first_group
// of global sample `sample`), and with kBranchSums the branch's gradient as stored added to
// sums[2]. `at`: the vector's first element in the rows.
template <bool kDropout, bool kBranchSums, int kSums>
__device__ __forceinline__ void finish_vector(const float (&v)[kVectorWidth], const float (&dy)[kVectorWidth],
                                              const float (&w)[kVectorWidth], float (&dx)[kVectorWidth], float row_mean,
                                              float row_rstd, const RowGradMeans& means, std::uint16_t* d_x,
                                              std::int64_t at, const LayernormBranchGrad& branch, std::uint64_t sample,
                                              std::uint64_t first_group, float (&sums)[kSums][kVectorWidth]) {
  add_input_grad<kVectorWidth>(v, dy, w, row_mean, row_rstd, means, dx);
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
      drop_vector(branch.dropout, sample, first_group, g);
      unpack_bf16(store_packed_bf16(branch.d_branch + at, g), g);
    }
    if constexpr (kBranchSums) {
#pragma unroll
      for (int i = 0; i < kVectorWidth; ++i) sums[kSums - 1][i] += g[i];
    }
  }
}

// The whole backward of a chunk of rows with 16-byte vectors (cols % 8 == 0, aligned) longer
// than layernorm_backward_rows_kernel holds, one block a chunk. Phase 1, a warp a row: the row's mean(dxhat) and
// mean(dxhat xhat) (row_grad_means). Phase 2, by tiles of 256 columns: thread (tx = threadIdx.x % 32, ty = threadIdx.x
// / 32) takes the 8 columns tile + 8 tx of rows ty, ty + 8, ... of the chunk, adds their d_x (add_input_grad) and sums
// their d_weight and d_bias terms; the 8 row-thread sums are added in ty order into the chunk's partials
// (write_chunk_partials). The rows are read twice, the second time from cache, instead of a second kernel reading them
// from memory again. With kDropout the branch's gradient dropout(d_x) is written too, from d_x as stored (the dropout
// kernel's values), and with kBranchSums its column sums (or d_x's, without dropout) are a third partial sum: the
// dropout or column-sum pass that would read d_x back is not needed.
template <bool kDropout, bool kBranchSums>
__global__ void __launch_bounds__(kThreads, kBackwardBlocksPerMultiprocessor)
    layernorm_backward_tiles_kernel(const std::uint16_t* d_out, const std::uint16_t* x, const std::uint16_t* weight,
                                    const float* mean, const float* rstd, std::uint16_t* d_x, float* workspace,
                                    std::int64_t rows, std::int64_t cols, std::int64_t rows_per_chunk,
                                    std::int64_t chunks, LayernormBranchGrad branch) {
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
        std::uint64_t sample = 0;
        std::uint64_t first_group = 0;
        if constexpr (kDropout) {
          sample = row_draws[r][0];
          first_group = row_draws[r][1] + static_cast<std::uint64_t>(c / 4);
        }
        finish_vector<kDropout, kBranchSums, kSums>(v, dy, w, dx, row_mean, row_rstd,
                                                    {row_terms[r][2], row_terms[r][3]}, d_x, at, branch, sample,
                                                    first_group, sums);
      }
    }
    write_chunk_partials<kVectorWidth, kSums>(sums, staged, tile, chunk, cols, chunks, workspace);
  }
}

// The row-held backward of rows of up to kHeldVectors * kHeldMaxThreads vectors: a block per
// chunk of rows, a thread per kVectors 16-byte vectors of the row (thread t holds vectors t,
// t + blockDim.x, ...), the block taking the chunk's rows one at a time. Each row is read
// once: a thread loads its vectors of x, d_out and d_x (the next row's while this row's
// reductions wait at the barrier), sums its part of the row's two reductions, the warps'
// sums meet in shared memory (double-buffered by row parity: one barrier a row) and are
// added in warp order, and the thread then writes its d_x (add_input_grad) and adds its
// columns' d_weight and d_bias terms, in row order, to sums it holds for the chunk. With
// kDropout the branch's gradient dropout(d_x) is written from d_x as stored, and with
// kBranchSums its column sums (or d_x's, without dropout) are a third sum. Each thread
// writes its columns' chunk sums to the partials at the end, without staging or barriers.
constexpr int kHeldMaxVectors = 2;
template <int kVectors>
struct HeldRowBlock {
  // One vector a thread: small blocks, several resident (the row's chunk sums and the
  // next row's loads fit the registers of three 256-thread blocks). Two: up to 512 threads
  // with the registers of one.
  static constexpr int kMaxThreads = kVectors == 1 ? 256 : 512;
  static constexpr int kMinBlocks = kVectors == 1 ? 3 : 1;
  static constexpr std::int64_t kMaxCols = std::int64_t{kMaxThreads} * kVectors * kVectorWidth;
};
constexpr std::int64_t kHeldMaxCols = HeldRowBlock<kHeldMaxVectors>::kMaxCols;

// A thread's vectors of one row, as loaded, and the row's statistics.
template <int kVectors>
struct HeldRow {
  uint4 x[kVectors];
  uint4 dy[kVectors];
  uint4 dx[kVectors];
  float mean;
  float rstd;
};

template <int kVectors>
__device__ __forceinline__ void load_held_row(HeldRow<kVectors>& row, const std::uint16_t* d_out,
                                              const std::uint16_t* x, const std::uint16_t* d_x, const float* mean,
                                              const float* rstd, std::int64_t index, std::int64_t cols,
                                              const std::int64_t (&col)[kVectors]) {
#pragma unroll
  for (int k = 0; k < kVectors; ++k) {
    if (col[k] >= cols) {  // past the row: nothing to load, zeros to carry
      row.x[k] = row.dy[k] = row.dx[k] = make_uint4(0, 0, 0, 0);
      continue;
    }
    const std::int64_t at = index * cols + col[k];
    row.x[k] = *reinterpret_cast<const uint4*>(x + at);
    row.dy[k] = *reinterpret_cast<const uint4*>(d_out + at);
    row.dx[k] = *reinterpret_cast<const uint4*>(d_x + at);
  }
  row.mean = mean[index];
  row.rstd = rstd[index];
}

template <int kVectors, bool kDropout, bool kBranchSums>
__global__ void __launch_bounds__(HeldRowBlock<kVectors>::kMaxThreads, HeldRowBlock<kVectors>::kMinBlocks)
    layernorm_backward_rows_kernel(const std::uint16_t* d_out, const std::uint16_t* x, const std::uint16_t* weight,
                                   const float* mean, const float* rstd, std::uint16_t* d_x, float* workspace,
                                   std::int64_t rows, std::int64_t cols, std::int64_t rows_per_chunk,
                                   std::int64_t chunks, LayernormBranchGrad branch) {
  constexpr int kSums = kBranchSums ? 3 : 2;
  constexpr int kMaxWarps = HeldRowBlock<kVectors>::kMaxThreads / kWarp;
  // The warps' sums of a row's two reductions, by row parity.
  __shared__ float2 warp_sums[2][kMaxWarps];
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const int warp = static_cast<int>(threadIdx.x) / kWarp;
  const int warps = static_cast<int>(blockDim.x) / kWarp;
  const std::int64_t chunk = blockIdx.x;
  const std::int64_t row_begin = chunk * rows_per_chunk;
  const std::int64_t row_end = row_begin + rows_per_chunk < rows ? row_begin + rows_per_chunk : rows;
  // The thread's columns and their weights, packed: the row's values are unpacked where
  // used, so that the next row's loads and the chunk sums fit beside them.
  std::int64_t col[kVectors];
  uint4 w_packed[kVectors];
#pragma unroll
  for (int k = 0; k < kVectors; ++k) {
    col[k] = (static_cast<std::int64_t>(threadIdx.x) + static_cast<std::int64_t>(k) * blockDim.x) * kVectorWidth;
    w_packed[k] = col[k] < cols ? *reinterpret_cast<const uint4*>(weight + col[k]) : make_uint4(0, 0, 0, 0);
  }
  // With dropout: the row's global sample and its row inside that sample, stepped row by row.
  std::uint64_t sample = 0;
  std::int64_t sample_row = 0;
  if constexpr (kDropout) {
    const std::int64_t batch_row = static_cast<std::int64_t>(branch.dropout.first_element) / cols + row_begin;
    const std::int64_t in_batch = batch_row / branch.rows_per_sample;
    sample = first_sample_of(branch.dropout) + static_cast<std::uint64_t>(in_batch);
    sample_row = batch_row - in_batch * branch.rows_per_sample;
  }
  const float inv_cols = 1.0f / static_cast<float>(cols);
  float sums[kVectors][kSums][kVectorWidth] = {};
  HeldRow<kVectors> row;
  load_held_row(row, d_out, x, d_x, mean, rstd, row_begin, cols, col);
  for (std::int64_t index = row_begin; index < row_end; ++index) {
    float dxhat_sum = 0.0f;
    float dxhat_xhat_sum = 0.0f;
#pragma unroll
    for (int k = 0; k < kVectors; ++k) {
      if (col[k] >= cols) continue;
      float v[kVectorWidth];
      float dy[kVectorWidth];
      float w[kVectorWidth];
      unpack_bf16(row.x[k], v);
      unpack_bf16(row.dy[k], dy);
      unpack_bf16(w_packed[k], w);
      add_reduction_terms<kVectorWidth>(v, dy, w, row.mean, row.rstd, dxhat_sum, dxhat_xhat_sum);
    }
    dxhat_sum = warp_sum(dxhat_sum);
    dxhat_xhat_sum = warp_sum(dxhat_xhat_sum);
    const int parity = static_cast<int>((index - row_begin) & 1);
    if (lane == 0) warp_sums[parity][warp] = make_float2(dxhat_sum, dxhat_xhat_sum);
    const HeldRow<kVectors> current = row;
    if (index + 1 < row_end) load_held_row(row, d_out, x, d_x, mean, rstd, index + 1, cols, col);
    __syncthreads();
    RowGradMeans means{0.0f, 0.0f};
    for (int other = 0; other < warps; ++other) {
      const float2 part = warp_sums[parity][other];
      means.dxhat += part.x;
      means.dxhat_xhat += part.y;
    }
    means.dxhat *= inv_cols;
    means.dxhat_xhat *= inv_cols;
#pragma unroll
    for (int k = 0; k < kVectors; ++k) {
      if (col[k] >= cols) continue;
      const std::int64_t at = index * cols + col[k];
      float v[kVectorWidth];
      float dy[kVectorWidth];
      float w[kVectorWidth];
      float dx[kVectorWidth];
      unpack_bf16(current.x[k], v);
      unpack_bf16(current.dy[k], dy);
      unpack_bf16(w_packed[k], w);
      unpack_bf16(current.dx[k], dx);
      const auto first_group = static_cast<std::uint64_t>(sample_row * (cols / 4) + col[k] / 4);
      finish_vector<kDropout, kBranchSums, kSums>(v, dy, w, dx, current.mean, current.rstd, means, d_x, at, branch,
                                                  sample, first_group, sums[k]);
    }
    if constexpr (kDropout) {
      if (++sample_row == branch.rows_per_sample) {
        sample_row = 0;
        ++sample;
      }
    }
  }
#pragma unroll
  for (int k = 0; k < kVectors; ++k) {
    if (col[k] >= cols) continue;
#pragma unroll
    for (int s = 0; s < kSums; ++s)
      store_f32<kVectorWidth>(workspace + (s * chunks + chunk) * cols + col[k], sums[k][s]);
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

// The fused backward of rows of 16-byte vectors for one kind of branch gradient: the
// row-held kernel with the fewest vectors a thread that the row fits, or the tile kernel.
template <bool kDropout, bool kBranchSums>
cudaError_t launch_fused_backward(const std::uint16_t* d_out, const std::uint16_t* x, const std::uint16_t* weight,
                                  const float* mean, const float* rstd, std::uint16_t* d_x, float* workspace,
                                  std::int64_t rows, std::int64_t cols, const Chunking& chunking, cudaStream_t stream,
                                  const LayernormBranchGrad& branch) {
  const auto blocks = static_cast<unsigned>(chunking.chunks);
  const std::int64_t vectors = cols / kVectorWidth;
  // Whole warps of threads holding `per_thread` vectors each.
  auto threads_for = [vectors](std::int64_t per_thread) {
    const std::int64_t threads = (vectors + per_thread - 1) / per_thread;
    return static_cast<unsigned>((threads + kWarp - 1) / kWarp * kWarp);
  };
  if (cols <= HeldRowBlock<1>::kMaxCols) {
    layernorm_backward_rows_kernel<1, kDropout, kBranchSums><<<blocks, threads_for(1), 0, stream>>>(
        d_out, x, weight, mean, rstd, d_x, workspace, rows, cols, chunking.rows_per_chunk, chunking.chunks, branch);
  } else if (cols <= kHeldMaxCols) {
    layernorm_backward_rows_kernel<kHeldMaxVectors, kDropout, kBranchSums>
        <<<blocks, threads_for(kHeldMaxVectors), 0, stream>>>(d_out, x, weight, mean, rstd, d_x, workspace, rows, cols,
                                                              chunking.rows_per_chunk, chunking.chunks, branch);
  } else {
    layernorm_backward_tiles_kernel<kDropout, kBranchSums><<<blocks, kThreads, 0, stream>>>(
        d_out, x, weight, mean, rstd, d_x, workspace, rows, cols, chunking.rows_per_chunk, chunking.chunks, branch);
  }
  return cudaGetLastError();
}

}  // namespace

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
    auto* fused =
        branch.dropped()
            ? (branch.d_bias != nullptr ? launch_fused_backward<true, true> : launch_fused_backward<true, false>)
            : (branch.d_bias != nullptr ? launch_fused_backward<false, true> : launch_fused_backward<false, false>);
    status = fused(d_out, x, weight, mean, rstd, d_x, workspace, rows, cols, chunking, stream_of(launch), branch);
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
