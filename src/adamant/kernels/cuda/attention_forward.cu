// Causal attention forward (kernels/attention.h) in one kernel per (sample, head,
// block of 64 queries) on tensor cores. probs must be written in full, so this is
// not a flash kernel: pass 1 runs over the key blocks up to the diagonal for each
// row's maximum and normaliser; pass 2 recomputes the scores, writes the final
// bf16 probabilities and accumulates out = dropout(probs) v in fp32 registers.
// Recomputing q k^T costs one extra small GEMM and saves an fp32 score buffer.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "adamant/kernels/cuda/attention_launchers.h"
#include "adamant/kernels/cuda/attention_philox.cuh"
#include "adamant/kernels/cuda/attention_tiles.cuh"

namespace adamant::kernels::cuda::attention_launchers {

namespace {

using namespace attention_detail;  // NOLINT(build/namespaces): the kernels' own helpers

constexpr int kForwardThreads = 128;  // 4 warps of 16 query rows
constexpr float kLog2E = 1.4426950408889634f;

template <int kHeadDim>
struct ForwardLayout {
  static constexpr std::size_t q = 0;
  static constexpr std::size_t k = q + token_tile_bytes(kHeadDim);
  static constexpr std::size_t v = k + token_tile_bytes(kHeadDim);
  static constexpr std::size_t scores = v + token_tile_bytes(kHeadDim);  // fp32 q k^T
  static constexpr std::size_t dropped = scores + kScoreTileBytes;       // bf16 dropout(probs) for the PV product
  static constexpr std::size_t bytes = dropped + kProbTileBytes;
};

// Lane pairs own rows: lane 2r and 2r + 1 handle columns [0, 32) and [32, 64) of the
// warp's row r, so each probability row leaves as 4 contiguous 16-byte stores per lane.
template <int kHeadDim>
__global__ void __launch_bounds__(kForwardThreads)
    attention_forward_kernel(ForwardOperands operands, Problem problem, Dropout dropout, float scale_log2,
                             bool vector_rows) {
  extern __shared__ __align__(128) unsigned char shared[];
  using Layout = ForwardLayout<kHeadDim>;
  auto* q_tile = reinterpret_cast<std::uint16_t*>(shared + Layout::q);
  auto* k_tile = reinterpret_cast<std::uint16_t*>(shared + Layout::k);
  auto* v_tile = reinterpret_cast<std::uint16_t*>(shared + Layout::v);
  auto* scores = reinterpret_cast<float*>(shared + Layout::scores);
  auto* dropped = reinterpret_cast<std::uint16_t*>(shared + Layout::dropped);

  const int seq = problem.seq;
  const int query_block = static_cast<int>(gridDim.x - 1 - blockIdx.x);  // the longest rows start first
  const int head = static_cast<int>(blockIdx.y);
  const int sample = static_cast<int>(blockIdx.z);
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int first_query = query_block * kTile;

  const std::int64_t channels = static_cast<std::int64_t>(problem.heads) * kHeadDim;
  const std::int64_t token_stride = 3 * channels;
  const std::uint16_t* q_base = operands.qkv + static_cast<std::int64_t>(sample) * seq * token_stride + head * kHeadDim;
  const std::uint16_t* k_base = q_base + channels;
  const std::uint16_t* v_base = q_base + 2 * channels;

  load_token_tile<kHeadDim, kForwardThreads>(q_tile, q_base, token_stride, first_query, seq);
  __syncthreads();
  FragRowsA q_frags[kHeadDim / kFrag];
#pragma unroll
  for (int k = 0; k < kHeadDim / kFrag; ++k) {
    wmma::load_matrix_sync(q_frags[k], as_bf16(q_tile + warp * kWarpRows * kTokenPitch<kHeadDim> + k * kFrag),
                           kTokenPitch<kHeadDim>);
  }

  const int half = lane % 2;
  const int row_in_block = warp * kWarpRows + lane / 2;
  const int query = first_query + row_in_block;
  const bool row_valid = query < seq;
  float* warp_scores = scores + warp * kWarpRows * kScorePitch;
  const float* my_scores = scores + row_in_block * kScorePitch + half * (kTile / 2);

  // Pass 1: row maximum and normaliser, online over the key blocks (raw scores; the
  // 1/sqrt(d) and log2(e) factors are folded into the exponent).
  float row_max = -INFINITY;
  float row_sum = 0.0f;
  for (int key_block = 0; key_block <= query_block; ++key_block) {
    __syncthreads();
    load_token_tile<kHeadDim, kForwardThreads>(k_tile, k_base, token_stride, key_block * kTile, seq);
    __syncthreads();
    rows_times_tile_transposed<kHeadDim>(q_frags, k_tile, warp_scores);
    __syncwarp();
    const int first_key = key_block * kTile + half * (kTile / 2);
    float tile_max = -INFINITY;
#pragma unroll 8
    for (int c = 0; c < kTile / 2; ++c) {
      if (first_key + c <= query) tile_max = fmaxf(tile_max, my_scores[c]);
    }
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
    // Key 0 of block 0 and the first key of the diagonal block are never masked, so
    // new_max is finite from the first block on.
    const float new_max = fmaxf(row_max, tile_max);
    float tile_sum = 0.0f;
#pragma unroll 8
    for (int c = 0; c < kTile / 2; ++c) {
      if (first_key + c <= query) tile_sum += exp2f((my_scores[c] - new_max) * scale_log2);
    }
    tile_sum += __shfl_xor_sync(0xffffffffu, tile_sum, 1);
    row_sum = row_sum * exp2f((row_max - new_max) * scale_log2) + tile_sum;
    row_max = new_max;
    __syncwarp();  // scores are rewritten by the next block's product
  }
  const float inv_sum = 1.0f / row_sum;

  // Pass 2: probabilities, and out += dropout(probs) v.
  FragAcc out_acc[kHeadDim / kFrag];
#pragma unroll
  for (int n = 0; n < kHeadDim / kFrag; ++n) wmma::fill_fragment(out_acc[n], 0.0f);
  DropoutMask mask(dropout, sample, head, seq);
  const std::int64_t probs_row_offset =
      ((static_cast<std::int64_t>(sample) * problem.heads + head) * seq + query) * seq;
  std::uint16_t* probs_row = row_valid ? operands.probs + probs_row_offset : nullptr;
  std::uint16_t* my_dropped = dropped + row_in_block * kProbPitch + half * (kTile / 2);
  for (int key_block = 0; key_block <= query_block; ++key_block) {
    __syncthreads();
    load_token_tile<kHeadDim, kForwardThreads>(k_tile, k_base, token_stride, key_block * kTile, seq);
    load_token_tile<kHeadDim, kForwardThreads>(v_tile, v_base, token_stride, key_block * kTile, seq);
    __syncthreads();
    rows_times_tile_transposed<kHeadDim>(q_frags, k_tile, warp_scores);
    __syncwarp();
    const int first_key = key_block * kTile + half * (kTile / 2);
#pragma unroll
    for (int chunk = 0; chunk < kTile / 2 / kChunk; ++chunk) {
      std::uint16_t prob_bits[kChunk];
      std::uint16_t dropped_bits[kChunk];
#pragma unroll
      for (int e = 0; e < kChunk; ++e) {
        const int c = chunk * kChunk + e;
        const int key = first_key + c;
        const bool visible = row_valid && key <= query;
        const float prob = visible ? exp2f((my_scores[c] - row_max) * scale_log2) * inv_sum : 0.0f;
        prob_bits[e] = detail::f32_to_bf16_bits(prob);
        const float kept = visible && dropout.enabled ? prob * mask.factor_at(query, key) : prob;
        dropped_bits[e] = detail::f32_to_bf16_bits(kept);
      }
      *reinterpret_cast<uint4*>(my_dropped + chunk * kChunk) = pack_chunk(dropped_bits);
      if (row_valid) store_row_chunk(probs_row, first_key + chunk * kChunk, seq, vector_rows, prob_bits);
    }
    __syncwarp();
    accumulate_rows_times_tile<kHeadDim>(out_acc, dropped + warp * kWarpRows * kProbPitch, v_tile);
    __syncwarp();  // scores and dropped probabilities are rewritten by the next block
  }

  // The future: zeros from the block after the diagonal to the end of each row, one
  // row at a time across the warp for contiguous stores.
  const int first_future = (query_block + 1) * kTile;
  for (int r = 0; r < kWarpRows; ++r) {
    const int row_query = first_query + warp * kWarpRows + r;
    if (row_query >= seq) break;
    std::uint16_t* row =
        operands.probs + ((static_cast<std::int64_t>(sample) * problem.heads + head) * seq + row_query) * seq;
    if (vector_rows) {
      // seq is a multiple of 8 here, and so is first_future.
      for (int col = first_future + lane * kChunk; col < seq; col += 32 * kChunk) {
        *reinterpret_cast<uint4*>(row + col) = make_uint4(0, 0, 0, 0);
      }
    } else {
      for (int col = first_future + lane; col < seq; col += 32) row[col] = 0;
    }
  }

  std::uint16_t* out_base = operands.out + static_cast<std::int64_t>(sample) * seq * channels + head * kHeadDim;
  store_rows_bf16(out_acc, warp_scores, out_base, channels, first_query + warp * kWarpRows, seq);
}

template <int kHeadDim>
cudaError_t launch_forward(const ForwardOperands& operands, const Problem& problem, const Dropout& dropout,
                           cudaStream_t stream) {
  constexpr std::size_t kBytes = ForwardLayout<kHeadDim>::bytes;
  const auto kernel = attention_forward_kernel<kHeadDim>;
  const cudaError_t attribute_status =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kBytes));
  if (attribute_status != cudaSuccess) return attribute_status;
  const float scale_log2 = kLog2E / std::sqrt(static_cast<float>(kHeadDim));
  const bool vector_rows = problem.seq % kChunk == 0 && reinterpret_cast<std::uintptr_t>(operands.probs) % 16 == 0;
  const dim3 grid((problem.seq + kTile - 1) / kTile, problem.heads, problem.batch);
  kernel<<<grid, kForwardThreads, kBytes, stream>>>(operands, problem, dropout, scale_log2, vector_rows);
  return cudaGetLastError();
}

}  // namespace

cudaError_t attention_forward(const ForwardOperands& operands, const Problem& problem, const Dropout& dropout,
                              cudaStream_t stream) {
  switch (problem.head_dim) {
    case 64:
      return launch_forward<64>(operands, problem, dropout, stream);
    case 128:
      return launch_forward<128>(operands, problem, dropout, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace adamant::kernels::cuda::attention_launchers
