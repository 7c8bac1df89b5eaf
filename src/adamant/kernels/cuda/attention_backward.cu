// Causal attention backward (kernels/attention.h) in two tensor-core kernels, both
// without atomics, so the result does not depend on scheduling:
//  1. per (sample, head, block of 64 queries): dp = d_out v^T through the dropout,
//     the row sums w = sum_j p dp, the score gradients ds = p (dp - w) / sqrt(d)
//     (written to the scratch as bf16) and dq = ds k, accumulated in registers;
//  2. per (sample, head, block of 64 keys): dk = ds^T q and dv = dropout(p)^T d_out
//     over the query blocks from the diagonal on.
// The rows' w needs all of dp before any ds, so kernel 1 makes two passes over the
// keys and recomputes dp rather than keeping it.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "adamant/kernels/cuda/attention_launchers.h"
#include "adamant/kernels/cuda/attention_philox.cuh"
#include "adamant/kernels/cuda/attention_tiles.cuh"

namespace adamant::kernels::cuda::attention_launchers {

namespace {

using namespace attention_detail;  // NOLINT(build/namespaces): the kernels' own helpers

constexpr int kQueryThreads = 128;  // 4 warps of 16 query rows
// 4 groups of 16 keys, each split over head-dimension halves of 64 for head_dim 128,
// which keeps a warp's dk and dv accumulators at 64 registers.
template <int kHeadDim>
constexpr int kKeyWarps = 4 * (kHeadDim / 64);
template <int kHeadDim>
constexpr int kKeyThreads = 32 * kKeyWarps<kHeadDim>;
constexpr int kKeyWarpCols = 64;  // head-dimension columns of dk and dv per warp

template <int kHeadDim>
struct QueryLayout {
  static constexpr std::size_t d_out = 0;
  static constexpr std::size_t k = d_out + token_tile_bytes(kHeadDim);
  static constexpr std::size_t v = k + token_tile_bytes(kHeadDim);
  static constexpr std::size_t dp = v + token_tile_bytes(kHeadDim);  // fp32 d_out v^T
  static constexpr std::size_t ds = dp + kScoreTileBytes;            // bf16 score gradients for the dq product
  static constexpr std::size_t bytes = ds + kProbTileBytes;
};

template <int kHeadDim>
struct KeyLayout {
  static constexpr std::size_t q = 0;
  static constexpr std::size_t d_out = q + token_tile_bytes(kHeadDim);
  static constexpr std::size_t ds = d_out + token_tile_bytes(kHeadDim);  // [query][key] score gradients
  static constexpr std::size_t dropped = ds + kProbTileBytes;            // [query][key] dropout(probs)
  static constexpr std::size_t bytes = dropped + kProbTileBytes;
  // After the loop the two 64-wide tiles hold each warp's 16 x 16 fp32 staging.
  static_assert(kKeyWarps<kHeadDim> * kFrag * kFrag * sizeof(float) <= 2 * kProbTileBytes);
};

// Rows as in the forward kernel: lanes 2r and 2r + 1 own columns [0, 32) and [32, 64)
// of the warp's row r.
template <int kHeadDim>
__global__ void __launch_bounds__(kQueryThreads)
    attention_backward_query_kernel(BackwardOperands operands, Problem problem, Dropout dropout, float scale,
                                    bool vector_rows) {
  extern __shared__ __align__(128) unsigned char shared[];
  using Layout = QueryLayout<kHeadDim>;
  auto* d_out_tile = reinterpret_cast<std::uint16_t*>(shared + Layout::d_out);
  auto* k_tile = reinterpret_cast<std::uint16_t*>(shared + Layout::k);
  auto* v_tile = reinterpret_cast<std::uint16_t*>(shared + Layout::v);
  auto* dp = reinterpret_cast<float*>(shared + Layout::dp);
  auto* ds = reinterpret_cast<std::uint16_t*>(shared + Layout::ds);

  const int seq = problem.seq;
  const int query_block = static_cast<int>(gridDim.x - 1 - blockIdx.x);  // the longest rows start first
  const int head = static_cast<int>(blockIdx.y);
  const int sample = static_cast<int>(blockIdx.z);
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int first_query = query_block * kTile;

  const std::int64_t channels = static_cast<std::int64_t>(problem.heads) * kHeadDim;
  const std::int64_t token_stride = 3 * channels;
  const std::int64_t qkv_offset = static_cast<std::int64_t>(sample) * seq * token_stride + head * kHeadDim;
  const std::uint16_t* k_base = operands.qkv + qkv_offset + channels;
  const std::uint16_t* v_base = operands.qkv + qkv_offset + 2 * channels;
  const std::uint16_t* d_out_base =
      operands.d_out + static_cast<std::int64_t>(sample) * seq * channels + head * kHeadDim;

  load_token_tile<kHeadDim, kQueryThreads>(d_out_tile, d_out_base, channels, first_query, seq);
  __syncthreads();
  FragRowsA d_out_frags[kHeadDim / kFrag];
#pragma unroll
  for (int k = 0; k < kHeadDim / kFrag; ++k) {
    wmma::load_matrix_sync(d_out_frags[k], as_bf16(d_out_tile + warp * kWarpRows * kTokenPitch<kHeadDim> + k * kFrag),
                           kTokenPitch<kHeadDim>);
  }

  const int half = lane % 2;
  const int row_in_block = warp * kWarpRows + lane / 2;
  const int query = first_query + row_in_block;
  const bool row_valid = query < seq;
  float* warp_dp = dp + warp * kWarpRows * kScorePitch;
  const float* my_dp = dp + row_in_block * kScorePitch + half * (kTile / 2);
  std::uint16_t* my_ds = ds + row_in_block * kProbPitch + half * (kTile / 2);
  const std::int64_t row_offset = ((static_cast<std::int64_t>(sample) * problem.heads + head) * seq + query) * seq;
  const std::uint16_t* probs_row = row_valid ? operands.probs + row_offset : nullptr;
  std::uint16_t* d_scores_row = row_valid ? operands.d_scores + row_offset : nullptr;
  DropoutMask mask(dropout, sample, head, seq);

  // Pass 1: w = sum_j p_j * dp_j with dp_j = (d_out . v_j) * dropout factor_j.
  float weighted_sum = 0.0f;
  for (int key_block = 0; key_block <= query_block; ++key_block) {
    __syncthreads();
    load_token_tile<kHeadDim, kQueryThreads>(v_tile, v_base, token_stride, key_block * kTile, seq);
    __syncthreads();
    rows_times_tile_transposed<kHeadDim>(d_out_frags, v_tile, warp_dp);
    __syncwarp();
    const int first_key = key_block * kTile + half * (kTile / 2);
    if (row_valid) {
#pragma unroll
      for (int chunk = 0; chunk < kTile / 2 / kChunk; ++chunk) {
        std::uint16_t prob_bits[kChunk];
        load_row_chunk(probs_row, first_key + chunk * kChunk, seq, vector_rows, prob_bits);
#pragma unroll
        for (int e = 0; e < kChunk; ++e) {
          const int c = chunk * kChunk + e;
          const int key = first_key + c;
          if (key > query) continue;
          const float factor = dropout.enabled ? mask.factor_at(query, key) : 1.0f;
          weighted_sum += detail::bf16_bits_to_f32(prob_bits[e]) * (my_dp[c] * factor);
        }
      }
    }
    __syncwarp();
  }
  weighted_sum += __shfl_xor_sync(0xffffffffu, weighted_sum, 1);

  // Pass 2: ds, to the scratch and into dq += ds k.
  FragAcc dq_acc[kHeadDim / kFrag];
#pragma unroll
  for (int n = 0; n < kHeadDim / kFrag; ++n) wmma::fill_fragment(dq_acc[n], 0.0f);
  for (int key_block = 0; key_block <= query_block; ++key_block) {
    __syncthreads();
    load_token_tile<kHeadDim, kQueryThreads>(k_tile, k_base, token_stride, key_block * kTile, seq);
    load_token_tile<kHeadDim, kQueryThreads>(v_tile, v_base, token_stride, key_block * kTile, seq);
    __syncthreads();
    rows_times_tile_transposed<kHeadDim>(d_out_frags, v_tile, warp_dp);
    __syncwarp();
    const int first_key = key_block * kTile + half * (kTile / 2);
#pragma unroll
    for (int chunk = 0; chunk < kTile / 2 / kChunk; ++chunk) {
      std::uint16_t prob_bits[kChunk] = {};
      if (row_valid) load_row_chunk(probs_row, first_key + chunk * kChunk, seq, vector_rows, prob_bits);
      std::uint16_t ds_bits[kChunk];
#pragma unroll
      for (int e = 0; e < kChunk; ++e) {
        const int c = chunk * kChunk + e;
        const int key = first_key + c;
        float d_score = 0.0f;
        if (row_valid && key <= query) {
          const float factor = dropout.enabled ? mask.factor_at(query, key) : 1.0f;
          d_score = detail::bf16_bits_to_f32(prob_bits[e]) * (my_dp[c] * factor - weighted_sum) * scale;
        }
        ds_bits[e] = detail::f32_to_bf16_bits(d_score);
      }
      *reinterpret_cast<uint4*>(my_ds + chunk * kChunk) = pack_chunk(ds_bits);
      if (row_valid) store_row_chunk(d_scores_row, first_key + chunk * kChunk, seq, vector_rows, ds_bits);
    }
    __syncwarp();
    accumulate_rows_times_tile<kHeadDim>(dq_acc, ds + warp * kWarpRows * kProbPitch, k_tile);
    __syncwarp();
  }

  std::uint16_t* dq_base = operands.d_qkv + qkv_offset;
  store_rows_bf16(dq_acc, warp_dp, dq_base, token_stride, first_query + warp * kWarpRows, seq);
}

// Warp w owns keys [16 (w % 4), +16) of the block and head-dimension columns
// [64 (w / 4), +64) of their dk and dv.
template <int kHeadDim>
__global__ void __launch_bounds__(kKeyThreads<kHeadDim>)
    attention_backward_key_kernel(BackwardOperands operands, Problem problem, Dropout dropout, bool vector_rows) {
  extern __shared__ __align__(128) unsigned char shared[];
  using Layout = KeyLayout<kHeadDim>;
  constexpr int kThreads = kKeyThreads<kHeadDim>;
  auto* q_tile = reinterpret_cast<std::uint16_t*>(shared + Layout::q);
  auto* d_out_tile = reinterpret_cast<std::uint16_t*>(shared + Layout::d_out);
  auto* ds = reinterpret_cast<std::uint16_t*>(shared + Layout::ds);
  auto* dropped = reinterpret_cast<std::uint16_t*>(shared + Layout::dropped);

  const int seq = problem.seq;
  const int key_block = static_cast<int>(blockIdx.x);  // block 0 sees every query block: it starts first
  const int head = static_cast<int>(blockIdx.y);
  const int sample = static_cast<int>(blockIdx.z);
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int key_group = warp % 4;
  const int col_offset = (warp / 4) * kKeyWarpCols;
  const int first_key = key_block * kTile;
  const int num_blocks = static_cast<int>(gridDim.x);

  const std::int64_t channels = static_cast<std::int64_t>(problem.heads) * kHeadDim;
  const std::int64_t token_stride = 3 * channels;
  const std::int64_t qkv_offset = static_cast<std::int64_t>(sample) * seq * token_stride + head * kHeadDim;
  const std::uint16_t* q_base = operands.qkv + qkv_offset;
  const std::uint16_t* d_out_base =
      operands.d_out + static_cast<std::int64_t>(sample) * seq * channels + head * kHeadDim;
  const std::int64_t head_rows = (static_cast<std::int64_t>(sample) * problem.heads + head) * seq;
  DropoutMask mask(dropout, sample, head, seq);

  FragAcc dk_acc[kKeyWarpCols / kFrag];
  FragAcc dv_acc[kKeyWarpCols / kFrag];
#pragma unroll
  for (int n = 0; n < kKeyWarpCols / kFrag; ++n) {
    wmma::fill_fragment(dk_acc[n], 0.0f);
    wmma::fill_fragment(dv_acc[n], 0.0f);
  }

  for (int query_block = key_block; query_block < num_blocks; ++query_block) {
    const int first_query = query_block * kTile;
    __syncthreads();
    load_token_tile<kHeadDim, kThreads>(q_tile, q_base, token_stride, first_query, seq);
    load_token_tile<kHeadDim, kThreads>(d_out_tile, d_out_base, channels, first_query, seq);
    // ds and dropout(probs) of 64 queries x 64 keys, zero outside the causal triangle.
    constexpr int kChunksPerRow = kTile / kChunk;
    for (int index = static_cast<int>(threadIdx.x); index < kTile * kChunksPerRow; index += kThreads) {
      const int r = index / kChunksPerRow;
      const int first_col = first_key + (index % kChunksPerRow) * kChunk;
      const int query = first_query + r;
      std::uint16_t ds_bits[kChunk] = {};
      std::uint16_t dropped_bits[kChunk] = {};
      if (query < seq && first_col <= query) {
        const std::int64_t row_offset = (head_rows + query) * seq;
        load_row_chunk(operands.d_scores + row_offset, first_col, seq, vector_rows, ds_bits);
        load_row_chunk(operands.probs + row_offset, first_col, seq, vector_rows, dropped_bits);
#pragma unroll
        for (int e = 0; e < kChunk; ++e) {
          const int key = first_col + e;
          if (key > query) {
            ds_bits[e] = 0;
            dropped_bits[e] = 0;
          } else if (dropout.enabled) {
            const float factor = mask.factor_at(query, key);
            dropped_bits[e] = detail::f32_to_bf16_bits(detail::bf16_bits_to_f32(dropped_bits[e]) * factor);
          }
        }
      }
      *reinterpret_cast<uint4*>(ds + r * kProbPitch + (index % kChunksPerRow) * kChunk) = pack_chunk(ds_bits);
      *reinterpret_cast<uint4*>(dropped + r * kProbPitch + (index % kChunksPerRow) * kChunk) = pack_chunk(dropped_bits);
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kTile / kFrag; ++k) {
      // Column-major A at (m, k) reads tile[k][m]: the [query][key] tiles transposed.
      FragColsA ds_t;
      FragColsA dropped_t;
      wmma::load_matrix_sync(ds_t, as_bf16(ds + k * kFrag * kProbPitch + key_group * kFrag), kProbPitch);
      wmma::load_matrix_sync(dropped_t, as_bf16(dropped + k * kFrag * kProbPitch + key_group * kFrag), kProbPitch);
#pragma unroll
      for (int n = 0; n < kKeyWarpCols / kFrag; ++n) {
        const int tile_offset = k * kFrag * kTokenPitch<kHeadDim> + col_offset + n * kFrag;
        FragRowsB q_frag;
        FragRowsB d_out_frag;
        wmma::load_matrix_sync(q_frag, as_bf16(q_tile + tile_offset), kTokenPitch<kHeadDim>);
        wmma::load_matrix_sync(d_out_frag, as_bf16(d_out_tile + tile_offset), kTokenPitch<kHeadDim>);
        wmma::mma_sync(dk_acc[n], ds_t, q_frag, dk_acc[n]);
        wmma::mma_sync(dv_acc[n], dropped_t, d_out_frag, dv_acc[n]);
      }
    }
  }

  __syncthreads();  // the 64-wide tiles become the warps' staging
  float* staging = reinterpret_cast<float*>(shared + Layout::ds) + warp * kFrag * kFrag;
  std::uint16_t* dk_base = operands.d_qkv + qkv_offset + channels + col_offset;
  std::uint16_t* dv_base = operands.d_qkv + qkv_offset + 2 * channels + col_offset;
  const int first_row = first_key + key_group * kFrag;
  store_rows_bf16(dk_acc, staging, dk_base, token_stride, first_row, seq);
  store_rows_bf16(dv_acc, staging, dv_base, token_stride, first_row, seq);
}

template <typename Kernel>
cudaError_t allow_shared_bytes(Kernel kernel, std::size_t bytes) {
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes));
}

template <int kHeadDim>
cudaError_t launch_backward(const BackwardOperands& operands, const Problem& problem, const Dropout& dropout,
                            cudaStream_t stream) {
  const bool vector_rows = problem.seq % kChunk == 0 && reinterpret_cast<std::uintptr_t>(operands.probs) % 16 == 0 &&
                           reinterpret_cast<std::uintptr_t>(operands.d_scores) % 16 == 0;
  const dim3 grid((problem.seq + kTile - 1) / kTile, problem.heads, problem.batch);

  const auto query_kernel = attention_backward_query_kernel<kHeadDim>;
  constexpr std::size_t kQueryBytes = QueryLayout<kHeadDim>::bytes;
  cudaError_t status = allow_shared_bytes(query_kernel, kQueryBytes);
  if (status != cudaSuccess) return status;
  const float scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
  query_kernel<<<grid, kQueryThreads, kQueryBytes, stream>>>(operands, problem, dropout, scale, vector_rows);
  status = cudaGetLastError();
  if (status != cudaSuccess) return status;

  const auto key_kernel = attention_backward_key_kernel<kHeadDim>;
  constexpr std::size_t kKeyBytes = KeyLayout<kHeadDim>::bytes;
  status = allow_shared_bytes(key_kernel, kKeyBytes);
  if (status != cudaSuccess) return status;
  key_kernel<<<grid, kKeyThreads<kHeadDim>, kKeyBytes, stream>>>(operands, problem, dropout, vector_rows);
  return cudaGetLastError();
}

}  // namespace

cudaError_t attention_backward(const BackwardOperands& operands, const Problem& problem, const Dropout& dropout,
                               cudaStream_t stream) {
  switch (problem.head_dim) {
    case 64:
      return launch_backward<64>(operands, problem, dropout, stream);
    case 128:
      return launch_backward<128>(operands, problem, dropout, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace adamant::kernels::cuda::attention_launchers
