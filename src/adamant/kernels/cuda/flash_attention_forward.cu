// Causal flash attention forward (kernels/flash_attention.h): one block per
// (sample, head, 64 queries) walks the key blocks up to the diagonal once with an
// online softmax (running row maximum and denominator, the output rescaled when
// the maximum grows), so no probability leaves the chip. It writes the bf16
// output and each row's logsumexp, from which backward recomputes probabilities.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "adamant/kernels/cuda/attention_philox.cuh"
#include "adamant/kernels/cuda/flash_attention_launchers.h"
#include "adamant/kernels/cuda/flash_attention_tiles.cuh"

namespace adamant::kernels::cuda::flash_attention_launchers {

namespace {

using namespace flash_detail;  // NOLINT(build/namespaces): the kernels' own helpers

// The query tile is only read once into fragments, so it shares the key tile's space.
template <int kHeadDim>
struct ForwardLayout {
  static constexpr std::size_t k = 0;
  static constexpr std::size_t v = k + token_tile_bytes(kHeadDim);
  static constexpr std::size_t scores = v + token_tile_bytes(kHeadDim);  // fp32 q k^T
  static constexpr std::size_t probs = scores + kScoreTileBytes;         // bf16 dropout(unnormalised probs)
  static constexpr std::size_t out = probs + kProbTileBytes;             // fp32 running output
  static constexpr std::size_t bytes = out + acc_tile_bytes<kHeadDim>();
};

// Lanes 2r and 2r + 1 own row r of the warp: key columns [0, 32) and [32, 64) of
// the score tile, and halves of the head dimension of the output row.
template <int kHeadDim>
__global__ void __launch_bounds__(kThreads)
    flash_forward_kernel(ForwardOperands operands, Problem problem, Dropout dropout, float scale_log2) {
  extern __shared__ __align__(128) unsigned char shared[];
  using Layout = ForwardLayout<kHeadDim>;
  auto* k_tile = reinterpret_cast<std::uint16_t*>(shared + Layout::k);
  auto* v_tile = reinterpret_cast<std::uint16_t*>(shared + Layout::v);
  auto* scores = reinterpret_cast<float*>(shared + Layout::scores);
  auto* probs = reinterpret_cast<std::uint16_t*>(shared + Layout::probs);
  auto* out_acc = reinterpret_cast<float*>(shared + Layout::out);

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

  load_token_tile<kHeadDim, kThreads>(k_tile, q_base, token_stride, first_query, seq);
  zero_shared(out_acc, kTile * kAccPitch<kHeadDim>);
  __syncthreads();
  FragRowsA q_frags[kHeadDim / kFrag];
  load_warp_rows<kHeadDim>(q_frags, k_tile, warp);

  const int half = lane % 2;
  const int row_in_block = warp * kWarpRows + lane / 2;
  const int query = first_query + row_in_block;
  const bool row_valid = query < seq;
  float* warp_scores = scores + warp * kWarpRows * kScorePitch;
  const float* my_scores = scores + row_in_block * kScorePitch + half * (kTile / 2);
  std::uint16_t* my_probs = probs + row_in_block * kProbPitch + half * (kTile / 2);
  float* warp_out = out_acc + warp * kWarpRows * kAccPitch<kHeadDim>;
  float* my_out = out_acc + row_in_block * kAccPitch<kHeadDim> + half * (kHeadDim / 2);
  attention_detail::DropoutMask mask(dropout, sample);
  const std::uint64_t mask_row =
      (static_cast<std::uint64_t>(head) * seq + static_cast<std::uint64_t>(query)) * static_cast<std::uint64_t>(seq);

  float row_max = -INFINITY;  // of the raw scores q.k (the scale is folded into the exponent)
  float row_sum = 0.0f;       // sum of exp((score - row_max) * scale) before dropout
  for (int key_block = 0; key_block <= query_block; ++key_block) {
    __syncthreads();  // the previous block's tiles (and the query tile) are consumed
    load_token_tile<kHeadDim, kThreads>(k_tile, k_base, token_stride, key_block * kTile, seq);
    load_token_tile<kHeadDim, kThreads>(v_tile, v_base, token_stride, key_block * kTile, seq);
    __syncthreads();
    rows_times_tile_transposed<kHeadDim>(q_frags, k_tile, warp_scores);
    __syncwarp();

    const int first_key = key_block * kTile + half * (kTile / 2);
    float tile_max = -INFINITY;
#pragma unroll 8
    for (int c = 0; c < kTile / 2; ++c) {
      if (row_valid && first_key + c <= query) tile_max = fmaxf(tile_max, my_scores[c]);
    }
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
    // A valid row sees key 0 in block 0 and its own key in the diagonal block, so its
    // maximum is finite from the first block on; rows past seq keep neutral values.
    const float new_max = fmaxf(row_max, tile_max);
    const float rescale = row_valid ? exp2f((row_max - new_max) * scale_log2) : 1.0f;

    float tile_sum = 0.0f;
#pragma unroll
    for (int chunk = 0; chunk < kTile / 2 / kChunk; ++chunk) {
      std::uint16_t bits[kChunk];
#pragma unroll
      for (int e = 0; e < kChunk; ++e) {
        const int c = chunk * kChunk + e;
        const int key = first_key + c;
        const bool visible = row_valid && key <= query;
        const float p = visible ? exp2f((my_scores[c] - new_max) * scale_log2) : 0.0f;
        tile_sum += p;
        const float kept = visible && dropout.enabled ? p * mask.factor(mask_row + static_cast<std::uint64_t>(key)) : p;
        bits[e] = detail::f32_to_bf16_bits(kept);
      }
      *reinterpret_cast<uint4*>(my_probs + chunk * kChunk) = pack_chunk(bits);
    }
    tile_sum += __shfl_xor_sync(0xffffffffu, tile_sum, 1);
    row_sum = row_sum * rescale + tile_sum;
    row_max = new_max;
#pragma unroll 8
    for (int d = 0; d < kHeadDim / 2; ++d) my_out[d] *= rescale;
    __syncwarp();
    accumulate_rows_times_tile_shared<kHeadDim>(warp_out, probs + warp * kWarpRows * kProbPitch, v_tile);
    __syncwarp();  // the scores, probabilities and output rows are rewritten by the next block
  }

  if (!row_valid) return;
  const float inv_sum = 1.0f / row_sum;
  std::uint16_t* out_row = operands.out + (static_cast<std::int64_t>(sample) * seq + query) * channels +
                           head * kHeadDim + half * (kHeadDim / 2);
#pragma unroll
  for (int chunk = 0; chunk < kHeadDim / 2 / kChunk; ++chunk) {
    std::uint16_t bits[kChunk];
#pragma unroll
    for (int e = 0; e < kChunk; ++e) bits[e] = detail::f32_to_bf16_bits(my_out[chunk * kChunk + e] * inv_sum);
    *reinterpret_cast<uint4*>(out_row + chunk * kChunk) = pack_chunk(bits);
  }
  if (half == 0) {
    // log(sum_j exp(s_j / sqrt(d))) = (max * scale_log2 + log2(sum)) * ln 2.
    operands.logsumexp[(static_cast<std::int64_t>(sample) * problem.heads + head) * seq + query] =
        (row_max * scale_log2 + log2f(row_sum)) * kLn2;
  }
}

template <int kHeadDim>
cudaError_t launch_forward(const ForwardOperands& operands, const Problem& problem, const Dropout& dropout,
                           cudaStream_t stream) {
  static_assert(fits_tiles<kHeadDim>());
  constexpr std::size_t kBytes = ForwardLayout<kHeadDim>::bytes;
  const auto kernel = flash_forward_kernel<kHeadDim>;
  const cudaError_t attribute_status =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kBytes));
  if (attribute_status != cudaSuccess) return attribute_status;
  const float scale_log2 = kLog2E / std::sqrt(static_cast<float>(kHeadDim));
  const dim3 grid((problem.seq + kTile - 1) / kTile, problem.heads, problem.batch);
  kernel<<<grid, kThreads, kBytes, stream>>>(operands, problem, dropout, scale_log2);
  return cudaGetLastError();
}

}  // namespace

cudaError_t flash_attention_forward(const ForwardOperands& operands, const Problem& problem, const Dropout& dropout,
                                    cudaStream_t stream) {
  if (problem.batch == 0 || problem.seq == 0) return cudaSuccess;
  switch (problem.head_dim) {
    case 64:
      return launch_forward<64>(operands, problem, dropout, stream);
    case 80:
      return launch_forward<80>(operands, problem, dropout, stream);
    case 96:
      return launch_forward<96>(operands, problem, dropout, stream);
    case 128:
      return launch_forward<128>(operands, problem, dropout, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace adamant::kernels::cuda::flash_attention_launchers
