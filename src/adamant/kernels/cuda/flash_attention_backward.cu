// Causal flash attention backward (kernels/flash_attention.h), FlashAttention-2's
// deterministic scheme in three kernels without atomics:
//  1. per (token, head): D = rowsum(d_out o), parked in the first fp32 of the
//     token's dq slice of d_qkv (dq is written last, by kernel 3);
//  2. per (sample, head, 64 keys): over the query blocks from the diagonal on,
//     recompute p = exp(s / sqrt(d) - logsumexp), dp = (d_out v^T) through the
//     dropout, ds = p (dp - D) / sqrt(d); dv += dropout(p)^T d_out, dk += ds^T q;
//  3. per (sample, head, 64 queries): over the key blocks up to the diagonal, the
//     same ds, and dq += ds k.
// Every output element is summed by one warp in a fixed order, so runs agree bit for bit.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "adamant/kernels/cuda/attention_philox.cuh"
#include "adamant/kernels/cuda/flash_attention_launchers.h"
#include "adamant/kernels/cuda/flash_attention_tiles.cuh"

namespace adamant::kernels::cuda::flash_attention_launchers {

namespace {

using namespace flash_detail;  // NOLINT(build/namespaces): the kernels' own helpers

constexpr int kDotThreads = 256;

// The fp32 slot of D for (token, head): the start of that head's dq slice.
__device__ __forceinline__ float* d_slot(std::uint16_t* d_qkv, std::int64_t token, std::int64_t token_stride, int head,
                                         int head_dim) {
  return reinterpret_cast<float*>(d_qkv + token * token_stride + static_cast<std::int64_t>(head) * head_dim);
}

template <int kHeadDim>
__global__ void __launch_bounds__(kDotThreads) flash_backward_dot_kernel(BackwardOperands operands, Problem problem) {
  const std::int64_t index = static_cast<std::int64_t>(blockIdx.x) * kDotThreads + threadIdx.x;
  const std::int64_t rows = static_cast<std::int64_t>(problem.batch) * problem.seq * problem.heads;
  if (index >= rows) return;
  const std::int64_t token = index / problem.heads;
  const int head = static_cast<int>(index % problem.heads);
  const std::int64_t channels = static_cast<std::int64_t>(problem.heads) * kHeadDim;
  const std::uint16_t* o = operands.out + token * channels + head * kHeadDim;
  const std::uint16_t* d_o = operands.d_out + token * channels + head * kHeadDim;
  float sum = 0.0f;
#pragma unroll
  for (int c = 0; c < kHeadDim; c += kChunk) {
    std::uint16_t o_bits[kChunk], d_o_bits[kChunk];
    unpack_chunk(__ldg(reinterpret_cast<const uint4*>(o + c)), o_bits);
    unpack_chunk(__ldg(reinterpret_cast<const uint4*>(d_o + c)), d_o_bits);
#pragma unroll
    for (int e = 0; e < kChunk; ++e) sum += detail::bf16_bits_to_f32(o_bits[e]) * detail::bf16_bits_to_f32(d_o_bits[e]);
  }
  *d_slot(operands.d_qkv, token, 3 * channels, head, kHeadDim) = sum;
}

template <int kHeadDim>
struct KeyLayout {
  static constexpr std::size_t k = 0;
  static constexpr std::size_t v = k + token_tile_bytes(kHeadDim);
  static constexpr std::size_t q = v + token_tile_bytes(kHeadDim);
  static constexpr std::size_t d_out = q + token_tile_bytes(kHeadDim);
  static constexpr std::size_t scores = d_out + token_tile_bytes(kHeadDim);  // fp32 [key][query] k q^T
  static constexpr std::size_t dp = scores + kScoreTileBytes;                // fp32 [key][query] v d_out^T
  static constexpr std::size_t dropped = dp + kScoreTileBytes;               // bf16 [key][query] dropout(p)
  static constexpr std::size_t ds = dropped + kProbTileBytes;                // bf16 [key][query] score gradients
  static constexpr std::size_t lse = ds + kProbTileBytes;                    // fp32 [query] logsumexp * log2(e)
  static constexpr std::size_t d = lse + kTile * sizeof(float);              // fp32 [query] D
  static constexpr std::size_t bytes = d + kTile * sizeof(float);
};

// Warps own 16 keys each; lanes 2r and 2r + 1 own queries [0, 32) and [32, 64) of
// key row r of the transposed tiles.
template <int kHeadDim>
__global__ void __launch_bounds__(kThreads) flash_backward_key_kernel(BackwardOperands operands, Problem problem,
                                                                      Dropout dropout, float scale, float scale_log2) {
  extern __shared__ __align__(128) unsigned char shared[];
  using Layout = KeyLayout<kHeadDim>;
  auto* k_tile = reinterpret_cast<std::uint16_t*>(shared + Layout::k);
  auto* v_tile = reinterpret_cast<std::uint16_t*>(shared + Layout::v);
  auto* q_tile = reinterpret_cast<std::uint16_t*>(shared + Layout::q);
  auto* d_out_tile = reinterpret_cast<std::uint16_t*>(shared + Layout::d_out);
  auto* scores = reinterpret_cast<float*>(shared + Layout::scores);
  auto* dp = reinterpret_cast<float*>(shared + Layout::dp);
  auto* dropped = reinterpret_cast<std::uint16_t*>(shared + Layout::dropped);
  auto* ds = reinterpret_cast<std::uint16_t*>(shared + Layout::ds);
  auto* lse_log2 = reinterpret_cast<float*>(shared + Layout::lse);
  auto* d_values = reinterpret_cast<float*>(shared + Layout::d);

  const int seq = problem.seq;
  const int key_block = static_cast<int>(blockIdx.x);  // block 0 sees every query block: it starts first
  const int head = static_cast<int>(blockIdx.y);
  const int sample = static_cast<int>(blockIdx.z);
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int first_key = key_block * kTile;
  const int num_blocks = static_cast<int>(gridDim.x);

  const std::int64_t channels = static_cast<std::int64_t>(problem.heads) * kHeadDim;
  const std::int64_t token_stride = 3 * channels;
  const std::int64_t sample_token = static_cast<std::int64_t>(sample) * seq;
  const std::int64_t qkv_offset = sample_token * token_stride + head * kHeadDim;
  const std::uint16_t* q_base = operands.qkv + qkv_offset;
  const std::uint16_t* d_out_base = operands.d_out + sample_token * channels + head * kHeadDim;
  const float* lse_row = operands.logsumexp + (static_cast<std::int64_t>(sample) * problem.heads + head) * seq;

  load_token_tile<kHeadDim, kThreads>(k_tile, q_base + channels, token_stride, first_key, seq);
  load_token_tile<kHeadDim, kThreads>(v_tile, q_base + 2 * channels, token_stride, first_key, seq);

  FragAcc dk_acc[kHeadDim / kFrag];
  FragAcc dv_acc[kHeadDim / kFrag];
#pragma unroll
  for (int n = 0; n < kHeadDim / kFrag; ++n) {
    wmma::fill_fragment(dk_acc[n], 0.0f);
    wmma::fill_fragment(dv_acc[n], 0.0f);
  }

  const int half = lane % 2;
  const int key_in_block = warp * kWarpRows + lane / 2;
  const int key = first_key + key_in_block;
  float* warp_scores = scores + warp * kWarpRows * kScorePitch;
  float* warp_dp = dp + warp * kWarpRows * kScorePitch;
  const float* my_scores = scores + key_in_block * kScorePitch + half * (kTile / 2);
  const float* my_dp = dp + key_in_block * kScorePitch + half * (kTile / 2);
  std::uint16_t* my_dropped = dropped + key_in_block * kProbPitch + half * (kTile / 2);
  std::uint16_t* my_ds = ds + key_in_block * kProbPitch + half * (kTile / 2);
  attention_detail::DropoutMask mask(dropout, sample);

  for (int query_block = key_block; query_block < num_blocks; ++query_block) {
    const int first_query = query_block * kTile;
    __syncthreads();  // the previous query block's tiles are consumed
    load_token_tile<kHeadDim, kThreads>(q_tile, q_base, token_stride, first_query, seq);
    load_token_tile<kHeadDim, kThreads>(d_out_tile, d_out_base, channels, first_query, seq);
    for (int i = static_cast<int>(threadIdx.x); i < kTile; i += kThreads) {
      const int query = first_query + i;
      const bool valid = query < seq;
      lse_log2[i] = valid ? lse_row[query] * kLog2E : 0.0f;
      d_values[i] = valid ? *d_slot(operands.d_qkv, sample_token + query, token_stride, head, kHeadDim) : 0.0f;
    }
    __syncthreads();
    {
      FragRowsA rows[kHeadDim / kFrag];
      load_warp_rows<kHeadDim>(rows, k_tile, warp);
      rows_times_tile_transposed<kHeadDim>(rows, q_tile, warp_scores);
      load_warp_rows<kHeadDim>(rows, v_tile, warp);
      rows_times_tile_transposed<kHeadDim>(rows, d_out_tile, warp_dp);
    }
    __syncwarp();

    const int column0 = half * (kTile / 2);
#pragma unroll
    for (int chunk = 0; chunk < kTile / 2 / kChunk; ++chunk) {
      std::uint16_t dropped_bits[kChunk];
      std::uint16_t ds_bits[kChunk];
#pragma unroll
      for (int e = 0; e < kChunk; ++e) {
        const int c = chunk * kChunk + e;
        const int query = first_query + column0 + c;
        float kept = 0.0f;
        float d_score = 0.0f;
        if (query < seq && key <= query) {
          const float p = exp2f(my_scores[c] * scale_log2 - lse_log2[column0 + c]);
          const float factor =
              dropout.enabled
                  ? mask.factor((static_cast<std::uint64_t>(head) * seq + static_cast<std::uint64_t>(query)) *
                                    static_cast<std::uint64_t>(seq) +
                                static_cast<std::uint64_t>(key))
                  : 1.0f;
          kept = p * factor;
          d_score = p * (my_dp[c] * factor - d_values[column0 + c]) * scale;
        }
        dropped_bits[e] = detail::f32_to_bf16_bits(kept);
        ds_bits[e] = detail::f32_to_bf16_bits(d_score);
      }
      *reinterpret_cast<uint4*>(my_dropped + chunk * kChunk) = pack_chunk(dropped_bits);
      *reinterpret_cast<uint4*>(my_ds + chunk * kChunk) = pack_chunk(ds_bits);
    }
    __syncwarp();
    accumulate_rows_times_tile<kHeadDim>(dv_acc, dropped + warp * kWarpRows * kProbPitch, d_out_tile);
    accumulate_rows_times_tile<kHeadDim>(dk_acc, ds + warp * kWarpRows * kProbPitch, q_tile);
    __syncwarp();
  }

  std::uint16_t* dk_base = operands.d_qkv + qkv_offset + channels;
  store_rows_bf16(dk_acc, warp_scores, dk_base, token_stride, first_key + warp * kWarpRows, seq);
  store_rows_bf16(dv_acc, warp_scores, dk_base + channels, token_stride, first_key + warp * kWarpRows, seq);
}

// The query and d_out tiles are read once into fragments, so they share the key
// and value tiles' space.
template <int kHeadDim>
struct QueryLayout {
  static constexpr std::size_t k = 0;
  static constexpr std::size_t v = k + token_tile_bytes(kHeadDim);
  static constexpr std::size_t scores = v + token_tile_bytes(kHeadDim);  // fp32 [query][key] q k^T
  static constexpr std::size_t dp = scores + kScoreTileBytes;            // fp32 [query][key] d_out v^T
  static constexpr std::size_t ds = dp + kScoreTileBytes;                // bf16 [query][key] score gradients
  static constexpr std::size_t bytes = ds + kProbTileBytes;
};

// Rows as in the forward kernel: lanes 2r and 2r + 1 own keys [0, 32) and [32, 64)
// of the warp's query row r.
template <int kHeadDim>
__global__ void __launch_bounds__(kThreads)
    flash_backward_query_kernel(BackwardOperands operands, Problem problem, Dropout dropout, float scale,
                                float scale_log2) {
  extern __shared__ __align__(128) unsigned char shared[];
  using Layout = QueryLayout<kHeadDim>;
  auto* k_tile = reinterpret_cast<std::uint16_t*>(shared + Layout::k);
  auto* v_tile = reinterpret_cast<std::uint16_t*>(shared + Layout::v);
  auto* scores = reinterpret_cast<float*>(shared + Layout::scores);
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
  const std::int64_t sample_token = static_cast<std::int64_t>(sample) * seq;
  const std::int64_t qkv_offset = sample_token * token_stride + head * kHeadDim;
  const std::uint16_t* k_base = operands.qkv + qkv_offset + channels;
  const std::uint16_t* v_base = operands.qkv + qkv_offset + 2 * channels;
  const std::uint16_t* d_out_base = operands.d_out + sample_token * channels + head * kHeadDim;

  const int half = lane % 2;
  const int row_in_block = warp * kWarpRows + lane / 2;
  const int query = first_query + row_in_block;
  const bool row_valid = query < seq;
  // This row's D is read before any dq of the block is stored over it (kernel 3 owns its rows).
  const float d_value = row_valid ? *d_slot(operands.d_qkv, sample_token + query, token_stride, head, kHeadDim) : 0.0f;
  const float lse_log2 =
      row_valid ? operands.logsumexp[(static_cast<std::int64_t>(sample) * problem.heads + head) * seq + query] * kLog2E
                : 0.0f;

  load_token_tile<kHeadDim, kThreads>(k_tile, operands.qkv + qkv_offset, token_stride, first_query, seq);
  load_token_tile<kHeadDim, kThreads>(v_tile, d_out_base, channels, first_query, seq);
  __syncthreads();
  FragRowsA q_frags[kHeadDim / kFrag];
  FragRowsA d_out_frags[kHeadDim / kFrag];
  load_warp_rows<kHeadDim>(q_frags, k_tile, warp);
  load_warp_rows<kHeadDim>(d_out_frags, v_tile, warp);

  FragAcc dq_acc[kHeadDim / kFrag];
#pragma unroll
  for (int n = 0; n < kHeadDim / kFrag; ++n) wmma::fill_fragment(dq_acc[n], 0.0f);

  float* warp_scores = scores + warp * kWarpRows * kScorePitch;
  float* warp_dp = dp + warp * kWarpRows * kScorePitch;
  const float* my_scores = scores + row_in_block * kScorePitch + half * (kTile / 2);
  const float* my_dp = dp + row_in_block * kScorePitch + half * (kTile / 2);
  std::uint16_t* my_ds = ds + row_in_block * kProbPitch + half * (kTile / 2);
  attention_detail::DropoutMask mask(dropout, sample);
  const std::uint64_t mask_row =
      (static_cast<std::uint64_t>(head) * seq + static_cast<std::uint64_t>(query)) * static_cast<std::uint64_t>(seq);

  for (int key_block = 0; key_block <= query_block; ++key_block) {
    __syncthreads();  // the previous tiles (and the query and d_out tiles) are consumed
    load_token_tile<kHeadDim, kThreads>(k_tile, k_base, token_stride, key_block * kTile, seq);
    load_token_tile<kHeadDim, kThreads>(v_tile, v_base, token_stride, key_block * kTile, seq);
    __syncthreads();
    rows_times_tile_transposed<kHeadDim>(q_frags, k_tile, warp_scores);
    rows_times_tile_transposed<kHeadDim>(d_out_frags, v_tile, warp_dp);
    __syncwarp();
    const int first_key = key_block * kTile + half * (kTile / 2);
#pragma unroll
    for (int chunk = 0; chunk < kTile / 2 / kChunk; ++chunk) {
      std::uint16_t ds_bits[kChunk];
#pragma unroll
      for (int e = 0; e < kChunk; ++e) {
        const int c = chunk * kChunk + e;
        const int key = first_key + c;
        float d_score = 0.0f;
        if (row_valid && key <= query) {
          const float p = exp2f(my_scores[c] * scale_log2 - lse_log2);
          const float factor = dropout.enabled ? mask.factor(mask_row + static_cast<std::uint64_t>(key)) : 1.0f;
          d_score = p * (my_dp[c] * factor - d_value) * scale;
        }
        ds_bits[e] = detail::f32_to_bf16_bits(d_score);
      }
      *reinterpret_cast<uint4*>(my_ds + chunk * kChunk) = pack_chunk(ds_bits);
    }
    __syncwarp();
    accumulate_rows_times_tile<kHeadDim>(dq_acc, ds + warp * kWarpRows * kProbPitch, k_tile);
    __syncwarp();
  }

  store_rows_bf16(dq_acc, warp_scores, operands.d_qkv + qkv_offset, token_stride, first_query + warp * kWarpRows, seq);
}

template <typename Kernel>
cudaError_t allow_shared_bytes(Kernel kernel, std::size_t bytes) {
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes));
}

template <int kHeadDim>
cudaError_t launch_backward(const BackwardOperands& operands, const Problem& problem, const Dropout& dropout,
                            cudaStream_t stream) {
  static_assert(fits_tiles<kHeadDim>());
  const float scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
  const float scale_log2 = kLog2E * scale;
  const std::int64_t rows = static_cast<std::int64_t>(problem.batch) * problem.seq * problem.heads;
  const auto dot_blocks = static_cast<unsigned>((rows + kDotThreads - 1) / kDotThreads);
  flash_backward_dot_kernel<kHeadDim><<<dot_blocks, kDotThreads, 0, stream>>>(operands, problem);
  cudaError_t status = cudaGetLastError();
  if (status != cudaSuccess) return status;

  const dim3 grid((problem.seq + kTile - 1) / kTile, problem.heads, problem.batch);
  constexpr std::size_t kKeyBytes = KeyLayout<kHeadDim>::bytes;
  const auto key_kernel = flash_backward_key_kernel<kHeadDim>;
  status = allow_shared_bytes(key_kernel, kKeyBytes);
  if (status != cudaSuccess) return status;
  key_kernel<<<grid, kThreads, kKeyBytes, stream>>>(operands, problem, dropout, scale, scale_log2);
  status = cudaGetLastError();
  if (status != cudaSuccess) return status;

  constexpr std::size_t kQueryBytes = QueryLayout<kHeadDim>::bytes;
  const auto query_kernel = flash_backward_query_kernel<kHeadDim>;
  status = allow_shared_bytes(query_kernel, kQueryBytes);
  if (status != cudaSuccess) return status;
  query_kernel<<<grid, kThreads, kQueryBytes, stream>>>(operands, problem, dropout, scale, scale_log2);
  return cudaGetLastError();
}

}  // namespace

cudaError_t flash_attention_backward(const BackwardOperands& operands, const Problem& problem, const Dropout& dropout,
                                     cudaStream_t stream) {
  if (problem.batch == 0 || problem.seq == 0) return cudaSuccess;
  switch (problem.head_dim) {
    case 64:
      return launch_backward<64>(operands, problem, dropout, stream);
    case 80:
      return launch_backward<80>(operands, problem, dropout, stream);
    case 96:
      return launch_backward<96>(operands, problem, dropout, stream);
    case 128:
      return launch_backward<128>(operands, problem, dropout, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace adamant::kernels::cuda::flash_attention_launchers
