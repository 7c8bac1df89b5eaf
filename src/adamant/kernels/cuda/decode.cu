// Decoding-step kernels on bf16 (kernels/decode.h).
//
// decode_attention: one block per (sequence, head), kThreads threads. The block first
// stores the new key and value in the cache, then each thread scores every kThreads-th
// cached position (the whole key row in flight at once), kept in shared memory (capacity
// floats). A block-wide max and sum give the softmax; the weighted sum of values gives each
// thread 8 dimensions of a group of positions, and the groups' partial sums are added at the
// end. All sums are fp32; a single query row has little work, so the kernel is bound by the
// latency of reading the cache once, which these independent loads hide.
#include <cuda_bf16.h>

#include <climits>
#include <cstdint>

#include "adamant/kernels/cuda/decode_launchers.h"

namespace adamant::kernels::cuda::launchers {

namespace {

constexpr int kThreads = 256;
constexpr int kWarp = 32;
constexpr int kWarps = kThreads / kWarp;

__device__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }

__device__ float warp_sum(float v) {
#pragma unroll
  for (int offset = kWarp / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ float warp_max(float v) {
#pragma unroll
  for (int offset = kWarp / 2; offset > 0; offset /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// Block-wide reduction through `partials` (kWarps floats); every thread gets the result.
template <bool kMax>
__device__ float block_reduce(float v, float* partials) {
  v = kMax ? warp_max(v) : warp_sum(v);
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  __syncthreads();  // partials may still be read from the previous reduction
  if (lane == 0) partials[warp] = v;
  __syncthreads();
  float result = partials[0];
  for (int w = 1; w < kWarps; ++w) result = kMax ? fmaxf(result, partials[w]) : result + partials[w];
  return result;
}

// Dot products of the query with the cached keys: one position per thread, its key row read in
// 16-byte pieces that are all in flight at once (head_dim / 8 independent loads), rather than a
// warp per position with a chain of shuffles.
template <int kHeadDim>
__global__ void __launch_bounds__(kThreads)
    decode_attention_kernel(const __nv_bfloat16* qkv, __nv_bfloat16* cache, const std::int32_t* positions,
                            __nv_bfloat16* out, int heads, int capacity, float scale) {
  constexpr int kPieces = kHeadDim / 8;        // 16-byte pieces of a row
  constexpr int kGroups = kThreads / kPieces;  // positions summed at once in the value pass
  extern __shared__ float scores[];            // [capacity]
  __shared__ float query[kHeadDim];
  __shared__ float partials[kWarps];
  __shared__ float value_parts[kGroups][kHeadDim + 1];
  const int b = blockIdx.x / heads, h = blockIdx.x % heads;
  const int W = heads * kHeadDim;
  const int now = positions[b];
  const std::int64_t row_stride = 3 * static_cast<std::int64_t>(W);
  const __nv_bfloat16* fresh = qkv + static_cast<std::int64_t>(b) * 3 * W;
  __nv_bfloat16* sequence = cache + static_cast<std::int64_t>(b) * capacity * row_stride;
  for (int d = threadIdx.x; d < kHeadDim; d += kThreads) {
    sequence[now * row_stride + W + h * kHeadDim + d] = fresh[W + h * kHeadDim + d];
    sequence[now * row_stride + 2 * W + h * kHeadDim + d] = fresh[2 * W + h * kHeadDim + d];
    query[d] = to_float(fresh[h * kHeadDim + d]) * scale;
  }
  __syncthreads();  // the new key and value are in the cache for the passes below

  float local_max = -INFINITY;
  for (int t = threadIdx.x; t <= now; t += kThreads) {
    const uint4* key = reinterpret_cast<const uint4*>(sequence + t * row_stride + W + h * kHeadDim);
    uint4 pieces[kPieces];
#pragma unroll
    for (int p = 0; p < kPieces; ++p) pieces[p] = key[p];
    float dot = 0.0f;
#pragma unroll
    for (int p = 0; p < kPieces; ++p) {
      const auto* pairs = reinterpret_cast<const __nv_bfloat162*>(&pieces[p]);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const float2 k = __bfloat1622float2(pairs[i]);
        dot += query[8 * p + 2 * i] * k.x + query[8 * p + 2 * i + 1] * k.y;
      }
    }
    scores[t] = dot;
    local_max = fmaxf(local_max, dot);
  }
  const float max_score = block_reduce<true>(local_max, partials);  // its barrier publishes the scores
  float local_sum = 0.0f;
  for (int t = threadIdx.x; t <= now; t += kThreads) {
    const float p = __expf(scores[t] - max_score);
    scores[t] = p;
    local_sum += p;
  }
  const float total = block_reduce<false>(local_sum, partials);

  // Values: thread (group, piece) sums 8 dimensions over the positions group, group + kGroups, ...
  const int piece = threadIdx.x % kPieces, group = threadIdx.x / kPieces;
  float sum[8] = {};
#pragma unroll 4
  for (int t = group; group < kGroups && t <= now; t += kGroups) {
    const uint4 v = reinterpret_cast<const uint4*>(sequence + t * row_stride + 2 * W + h * kHeadDim)[piece];
    const auto* pairs = reinterpret_cast<const __nv_bfloat162*>(&v);
    const float p = scores[t];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 f = __bfloat1622float2(pairs[i]);
      sum[2 * i] += p * f.x;
      sum[2 * i + 1] += p * f.y;
    }
  }
  if (group < kGroups) {
#pragma unroll
    for (int i = 0; i < 8; ++i) value_parts[group][8 * piece + i] = sum[i];
  }
  __syncthreads();
  for (int d = threadIdx.x; d < kHeadDim; d += kThreads) {
    float value = 0.0f;
    for (int g = 0; g < kGroups; ++g) value += value_parts[g][d];
    out[(static_cast<std::int64_t>(b) * heads + h) * kHeadDim + d] = __float2bfloat16_rn(value / total);
  }
}

template <int kHeadDim>
cudaError_t launch_decode_attention(const void* qkv, void* cache, const std::int32_t* positions, void* out, int batch,
                                    int capacity, int heads, cudaStream_t stream) {
  const std::size_t score_bytes = static_cast<std::size_t>(capacity) * sizeof(float);
  // Above 48 KB a kernel must opt in to more shared memory.
  const cudaError_t status = cudaFuncSetAttribute(
      decode_attention_kernel<kHeadDim>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(score_bytes));
  if (status != cudaSuccess) return status;
  const float scale = 1.0f / sqrtf(static_cast<float>(kHeadDim));
  decode_attention_kernel<kHeadDim>
      <<<static_cast<unsigned>(batch) * static_cast<unsigned>(heads), kThreads, score_bytes, stream>>>(
          static_cast<const __nv_bfloat16*>(qkv), static_cast<__nv_bfloat16*>(cache), positions,
          static_cast<__nv_bfloat16*>(out), heads, capacity, scale);
  return cudaGetLastError();
}

__global__ void decode_embedding_kernel(const std::int32_t* tokens, const std::int32_t* positions,
                                        const __nv_bfloat16* word, const __nv_bfloat16* position, __nv_bfloat16* out,
                                        std::int64_t batch, std::int64_t channels, std::int64_t vocab,
                                        std::int64_t places) {
  const std::int64_t total = batch * channels;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t b = i / channels, c = i % channels;
    const std::int64_t token = tokens[b], place = positions[b];
    const bool valid = token >= 0 && token < vocab && place >= 0 && place < places;
    const float value = valid ? to_float(word[token * channels + c]) + to_float(position[place * channels + c])
                              : __uint_as_float(0x7fc00000u);  // NaN marks an id outside the tables
    out[i] = __float2bfloat16_rn(value);
  }
}

}  // namespace

cudaError_t decode_embedding(const std::int32_t* tokens, const std::int32_t* positions, const void* word,
                             const void* position, void* out, std::int64_t batch, std::int64_t channels,
                             std::int64_t vocab, std::int64_t places, cudaStream_t stream) {
  constexpr int kBlock = 256;
  const std::int64_t blocks = (batch * channels + kBlock - 1) / kBlock;
  decode_embedding_kernel<<<static_cast<unsigned>(blocks < 4096 ? blocks : 4096), kBlock, 0, stream>>>(
      tokens, positions, static_cast<const __nv_bfloat16*>(word), static_cast<const __nv_bfloat16*>(position),
      static_cast<__nv_bfloat16*>(out), batch, channels, vocab, places);
  return cudaGetLastError();
}

cudaError_t decode_attention(const void* qkv, void* cache, const std::int32_t* positions, void* out, int batch,
                             int capacity, int heads, int head_dim, cudaStream_t stream) {
  static_assert(kMaxHeadDim == 128, "one instantiation per head size below");
  switch (head_dim) {
    case 32:
      return launch_decode_attention<32>(qkv, cache, positions, out, batch, capacity, heads, stream);
    case 64:
      return launch_decode_attention<64>(qkv, cache, positions, out, batch, capacity, heads, stream);
    case 80:
      return launch_decode_attention<80>(qkv, cache, positions, out, batch, capacity, heads, stream);
    case 96:
      return launch_decode_attention<96>(qkv, cache, positions, out, batch, capacity, heads, stream);
    case 128:
      return launch_decode_attention<128>(qkv, cache, positions, out, batch, capacity, heads, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace adamant::kernels::cuda::launchers
