// Token + position embeddings on bf16 tables (kernels/embedding.h), over the slice
// [vocab_start, vocab_start + vocab) of the word table.
//
// Backward is deterministic without atomics or a sort:
// - d_position: one thread per (position, channel group) adds the batch's rows in
//   batch order onto d_position (the CPU kernel's order, so the results agree bit
//   for bit).
// - d_word: a token may occur many times, so rows of the table are owned: block
//   (vocab tile, channel tile) owns 32 table rows x 256 channels with fp32 sums in
//   shared memory. It scans the whole token list in chunks of 1024, compacts the
//   positions whose token falls in its tile into an ordered list (block prefix
//   sum), and each thread adds those d_out rows for its channel in token order.
//   At the end the sums of the rows that occurred are added onto d_word. Every
//   (row, channel) is summed by one thread in a fixed order: bit-identical runs.
//   The summation order differs from the CPU kernel's (d_word + (g1 + g2 + ...)
//   instead of ((d_word + g1) + g2) + ...), so the two agree to rounding only.
//   The price is that every block reads the token list (about 64 KB per 16K
//   tokens, from L2); only table rows that occur are read and written.
#include <cstdint>

#include "adamant/kernels/cuda/model_launchers_pointwise.h"
#include "adamant/kernels/cuda/pointwise_model_device.cuh"

namespace adamant::kernels::cuda {

using launchers::stream_of;

namespace {

using pointwise_detail::kVectorWidth;
using pointwise_detail::kWarp;
using pointwise_detail::load_bf16;
using pointwise_detail::load_f32;
using pointwise_detail::store_bf16;
using pointwise_detail::store_f32;

constexpr int kThreads = 256;
constexpr int kWarpsPerBlock = kThreads / kWarp;
constexpr int kBlocksPerMultiprocessor = 8;

// d_word tiles: 32 x 256 fp32 sums = 32 KB of shared memory per block.
constexpr int kWordRowsPerBlock = 32;
constexpr int kTokensPerThread = 4;
constexpr int kTokenChunk = kThreads * kTokensPerThread;

// kWidth = 8 needs channels % 8 == 0 and 16-byte aligned tables and output.
template <int kWidth>
__global__ void __launch_bounds__(kThreads)
    embedding_forward_kernel(const std::int32_t* tokens, const std::uint16_t* word, const std::uint16_t* position,
                             std::uint16_t* out, std::int64_t rows, std::int64_t seq, std::int64_t channels,
                             std::int64_t vocab, std::int64_t vocab_start) {
  const std::int64_t groups_per_row = channels / kWidth;
  const std::int64_t total = rows * groups_per_row;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    const std::int64_t row = i / groups_per_row;
    const std::int64_t c = (i - row * groups_per_row) * kWidth;
    const std::int64_t t = row % seq;
    const std::int64_t token = tokens[row];
    const std::int64_t word_row = token - vocab_start;
    float sum[kWidth];
    if (token < 0) {
#pragma unroll
      for (int k = 0; k < kWidth; ++k) sum[k] = __uint_as_float(0x7fc00000u);  // NaN: an invalid token id
    } else {
      if (word_row >= 0 && word_row < vocab) {
        load_bf16<kWidth>(word + word_row * channels + c, sum);
      } else {
#pragma unroll
        for (int k = 0; k < kWidth; ++k) sum[k] = 0.0f;  // another rank's slice holds the token
      }
      if (position != nullptr) {
        float p[kWidth];
        load_bf16<kWidth>(position + t * channels + c, p);
#pragma unroll
        for (int k = 0; k < kWidth; ++k) sum[k] += p[k];
      }
    }
    store_bf16<kWidth>(out + row * channels + c, sum);
  }
}

// d_position[t, c] += d_out[0, t, c] + d_out[1, t, c] + ... in batch order.
template <int kWidth>
__global__ void __launch_bounds__(kThreads)
    embedding_position_backward_kernel(const std::uint16_t* d_out, float* d_position, std::int64_t batch,
                                       std::int64_t seq, std::int64_t channels) {
  const std::int64_t groups_per_row = channels / kWidth;
  const std::int64_t total = seq * groups_per_row;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    const std::int64_t t = i / groups_per_row;
    const std::int64_t c = (i - t * groups_per_row) * kWidth;
    float sum[kWidth];
    load_f32<kWidth>(d_position + t * channels + c, sum);
    for (std::int64_t b = 0; b < batch; ++b) {
      float g[kWidth];
      load_bf16<kWidth>(d_out + (b * seq + t) * channels + c, g);
#pragma unroll
      for (int k = 0; k < kWidth; ++k) sum[k] += g[k];
    }
    store_f32<kWidth>(d_position + t * channels + c, sum);
  }
}

// Block (blockIdx.x, blockIdx.y) owns table rows [32 * blockIdx.x, + 32) and
// channel 256 * blockIdx.y + threadIdx.x.
__global__ void __launch_bounds__(kThreads)
    embedding_word_backward_kernel(const std::uint16_t* __restrict__ d_out, const std::int32_t* __restrict__ tokens,
                                   float* __restrict__ d_word, std::int64_t rows, std::int64_t channels,
                                   std::int64_t vocab, std::int64_t vocab_start) {
  __shared__ float sums[kWordRowsPerBlock][kThreads];
  __shared__ std::int32_t match_row[kTokenChunk];
  __shared__ std::uint8_t match_slot[kTokenChunk];
  __shared__ std::int32_t warp_counts[kWarpsPerBlock];
  __shared__ std::int32_t occurred[kWordRowsPerBlock];

  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid % kWarp;
  const int warp = tid / kWarp;
  const std::int64_t vocab_begin = static_cast<std::int64_t>(blockIdx.x) * kWordRowsPerBlock;
  const std::int64_t c = static_cast<std::int64_t>(blockIdx.y) * kThreads + tid;
  const bool owns_channel = c < channels;

  for (int slot = 0; slot < kWordRowsPerBlock; ++slot) sums[slot][tid] = 0.0f;
  if (tid < kWordRowsPerBlock) occurred[tid] = 0;
  __syncthreads();

  for (std::int64_t chunk_begin = 0; chunk_begin < rows; chunk_begin += kTokenChunk) {
    // This thread's 4 consecutive positions: which fall in the tile, and where.
    const std::int64_t first = chunk_begin + static_cast<std::int64_t>(tid) * kTokensPerThread;
    int slots[kTokensPerThread];
    int count = 0;
#pragma unroll
    for (int k = 0; k < kTokensPerThread; ++k) {
      slots[k] = -1;
      if (first + k < rows) {
        const std::int64_t word_row = tokens[first + k] - vocab_start;
        const std::int64_t slot = word_row - vocab_begin;
        if (word_row < vocab && slot >= 0 && slot < kWordRowsPerBlock) {
          slots[k] = static_cast<int>(slot);
          ++count;
        }
      }
    }
    // Exclusive prefix sum of the counts over the block, in thread order.
    int inclusive = count;
#pragma unroll
    for (int offset = 1; offset < kWarp; offset *= 2) {
      const int below = __shfl_up_sync(0xffffffffu, inclusive, offset);
      if (lane >= offset) inclusive += below;
    }
    if (lane == kWarp - 1) warp_counts[warp] = inclusive;
    __syncthreads();
    int position = inclusive - count;
    int matches = 0;
#pragma unroll
    for (int w = 0; w < kWarpsPerBlock; ++w) {
      if (w < warp) position += warp_counts[w];
      matches += warp_counts[w];
    }
#pragma unroll
    for (int k = 0; k < kTokensPerThread; ++k) {
      if (slots[k] < 0) continue;
      match_row[position] = static_cast<std::int32_t>(first + k);
      match_slot[position] = static_cast<std::uint8_t>(slots[k]);
      occurred[slots[k]] = 1;
      ++position;
    }
    __syncthreads();
    if (owns_channel) {
      // Unrolled so that the loads of several rows are in flight at once.
#pragma unroll 4
      for (int m = 0; m < matches; ++m) {
        float g[1];
        load_bf16<1>(d_out + static_cast<std::int64_t>(match_row[m]) * channels + c, g);
        sums[match_slot[m]][tid] += g[0];
      }
    }
    __syncthreads();  // the lists and warp_counts are rewritten by the next chunk
  }

  if (!owns_channel) return;
  for (int slot = 0; slot < kWordRowsPerBlock; ++slot) {
    const std::int64_t v = vocab_begin + slot;
    if (v < vocab && occurred[slot] != 0) d_word[v * channels + c] += sums[slot][tid];
  }
}

bool use_vectors(std::int64_t channels, const CudaLaunch& launch) {
  return launch.vectorized && channels % kVectorWidth == 0;
}

}  // namespace

int embedding_forward(const std::int32_t* tokens, const std::uint16_t* word, const std::uint16_t* position,
                      std::uint16_t* out, std::int64_t batch, std::int64_t seq, std::int64_t channels,
                      std::int64_t vocab, std::int64_t vocab_start, const CudaLaunch& launch) {
  if (channels <= 0 || seq <= 0 || vocab_start < 0) return cudaErrorInvalidValue;
  const std::int64_t rows = batch * seq;
  if (rows <= 0) return cudaSuccess;
  const bool vectors = use_vectors(channels, launch);
  const std::int64_t groups = rows * (vectors ? channels / kVectorWidth : channels);
  const int grid = pointwise_detail::capped_grid(groups, kThreads, launch.multiprocessors, kBlocksPerMultiprocessor);
  auto* kernel = vectors ? embedding_forward_kernel<kVectorWidth> : embedding_forward_kernel<1>;
  kernel<<<grid, kThreads, 0, stream_of(launch)>>>(tokens, word, position, out, rows, seq, channels, vocab,
                                                   vocab_start);
  return cudaGetLastError();
}

int embedding_backward(const std::uint16_t* d_out, const std::int32_t* tokens, float* d_word, float* d_position,
                       std::int64_t batch, std::int64_t seq, std::int64_t channels, std::int64_t vocab,
                       std::int64_t vocab_start, const CudaLaunch& launch) {
  if (channels <= 0 || seq <= 0 || vocab <= 0 || vocab_start < 0) return cudaErrorInvalidValue;
  const std::int64_t rows = batch * seq;
  if (rows <= 0) return cudaSuccess;
  if (rows > INT32_MAX - kTokenChunk) return cudaErrorInvalidValue;  // positions are kept as int32

  if (d_position != nullptr) {
    const bool vectors = use_vectors(channels, launch);
    const std::int64_t groups = seq * (vectors ? channels / kVectorWidth : channels);
    const int position_grid =
        pointwise_detail::capped_grid(groups, kThreads, launch.multiprocessors, kBlocksPerMultiprocessor);
    auto* position_kernel =
        vectors ? embedding_position_backward_kernel<kVectorWidth> : embedding_position_backward_kernel<1>;
    position_kernel<<<position_grid, kThreads, 0, stream_of(launch)>>>(d_out, d_position, batch, seq, channels);
    const cudaError_t status = cudaGetLastError();
    if (status != cudaSuccess) return status;
  }

  const std::int64_t vocab_tiles = (vocab + kWordRowsPerBlock - 1) / kWordRowsPerBlock;
  const std::int64_t channel_tiles = (channels + kThreads - 1) / kThreads;
  if (vocab_tiles > INT32_MAX || channel_tiles > 65535) return cudaErrorInvalidValue;
  const dim3 word_grid(static_cast<unsigned>(vocab_tiles), static_cast<unsigned>(channel_tiles));
  embedding_word_backward_kernel<<<word_grid, kThreads, 0, stream_of(launch)>>>(d_out, tokens, d_word, rows, channels,
                                                                                vocab, vocab_start);
  return cudaGetLastError();
}

}  // namespace adamant::kernels::cuda
