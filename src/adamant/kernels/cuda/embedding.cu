// Token + position embeddings on bf16 tables (kernels/embedding.h), over the slice
// [vocab_start, vocab_start + vocab) of the word table.
//
// Backward is deterministic, without atomics:
// - d_position: one thread per (position, channel group) adds the batch's rows in
//   batch order onto d_position (the CPU kernel's order, so the results agree bit
//   for bit).
// - d_word: a token may occur many times; embedding_word_grad.cu sorts the positions by
//   table row and sums each row's in order, in the caller's scratch.
#include <cstdint>

#include "adamant/kernels/cuda/embedding_word_grad.h"
#include "adamant/kernels/cuda/grad_rows.cuh"
#include "adamant/kernels/cuda/model_launchers_pointwise.h"
#include "adamant/kernels/cuda/pointwise_model_device.cuh"

namespace adamant::kernels::cuda {

using launchers::stream_of;

namespace {

using pointwise_detail::kVectorWidth;
using pointwise_detail::load_bf16;
using pointwise_detail::store_bf16;

constexpr int kThreads = 256;
constexpr int kBlocksPerMultiprocessor = 8;

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

// d_position[t, c] += d_out[0, t, c] + d_out[1, t, c] + ... in batch order (rounded once, in a bf16 buffer).
template <int kWidth, typename Grad>
__global__ void __launch_bounds__(kThreads)
    embedding_position_backward_kernel(const std::uint16_t* d_out, Grad* d_position, std::int64_t batch,
                                       std::int64_t seq, std::int64_t channels) {
  const std::int64_t groups_per_row = channels / kWidth;
  const std::int64_t total = seq * groups_per_row;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    const std::int64_t t = i / groups_per_row;
    const std::int64_t c = (i - t * groups_per_row) * kWidth;
    float sum[kWidth];
    grad_rows::load<kWidth>(d_position + t * channels + c, sum);
    for (std::int64_t b = 0; b < batch; ++b) {
      float g[kWidth];
      load_bf16<kWidth>(d_out + (b * seq + t) * channels + c, g);
#pragma unroll
      for (int k = 0; k < kWidth; ++k) sum[k] += g[k];
    }
    grad_rows::store<kWidth>(d_position + t * channels + c, sum);
  }
}

bool use_vectors(std::int64_t channels, const CudaLaunch& launch) {
  return launch.vectorized && channels % kVectorWidth == 0;
}

template <typename Grad>
cudaError_t position_backward(const std::uint16_t* d_out, Grad* d_position, std::int64_t batch, std::int64_t seq,
                              std::int64_t channels, const CudaLaunch& launch) {
  const bool vectors = use_vectors(channels, launch);
  const std::int64_t groups = seq * (vectors ? channels / kVectorWidth : channels);
  const int grid = pointwise_detail::capped_grid(groups, kThreads, launch.multiprocessors, kBlocksPerMultiprocessor);
  auto* kernel =
      vectors ? embedding_position_backward_kernel<kVectorWidth, Grad> : embedding_position_backward_kernel<1, Grad>;
  kernel<<<grid, kThreads, 0, stream_of(launch)>>>(d_out, d_position, batch, seq, channels);
  return cudaGetLastError();
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

int embedding_backward(const std::uint16_t* d_out, const std::int32_t* tokens, void* d_word, void* d_position,
                       DType grad_dtype, void* scratch, std::size_t scratch_bytes, std::int64_t batch, std::int64_t seq,
                       std::int64_t channels, std::int64_t vocab, std::int64_t vocab_start, const CudaLaunch& launch) {
  if (channels <= 0 || seq <= 0 || vocab <= 0 || vocab_start < 0) return cudaErrorInvalidValue;
  const std::int64_t rows = batch * seq;
  if (rows <= 0) return cudaSuccess;

  if (grad_dtype != DType::f32 && grad_dtype != DType::bf16) return cudaErrorInvalidValue;
  if (d_position != nullptr) {
    const cudaError_t status =
        grad_dtype == DType::f32
            ? position_backward(d_out, static_cast<float*>(d_position), batch, seq, channels, launch)
            : position_backward(d_out, static_cast<std::uint16_t*>(d_position), batch, seq, channels, launch);
    if (status != cudaSuccess) return status;
  }
  return embedding_detail::word_grad(d_out, tokens, d_word, grad_dtype, rows, channels, vocab, vocab_start, scratch,
                                     scratch_bytes, launch.vectorized, stream_of(launch));
}

}  // namespace adamant::kernels::cuda
