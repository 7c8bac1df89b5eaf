// Decoding-step kernels on bf16 (kernels/decode.h).
//
// decode_attention: one block per (sequence, head), kThreads threads. The block first
// stores the new key and value in the cache, then each warp takes every kWarps-th cached
// position: its lanes read the key row together (coalesced) and a warp sum gives the score,
// kept in shared memory (capacity floats). A block-wide max and sum give the softmax; the
// weighted sum of values splits the positions over kThreads / head_dim groups of threads
// (one thread per dimension in a group) and adds the groups' partial sums at the end. All
// sums are fp32; a single query row has little work, so the kernel is bound by reading the
// cache once.
#include <cuda_bf16.h>

#include <climits>
#include <cstdint>

#include "adamant/kernels/cuda/decode_launchers.h"

namespace adamant::kernels::cuda::launchers {

namespace {

constexpr int kThreads = 128;
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

__global__ void __launch_bounds__(kThreads)
    decode_attention_kernel(const __nv_bfloat16* qkv, __nv_bfloat16* cache, const std::int32_t* positions,
                            __nv_bfloat16* out, int heads, int head_dim, int capacity, float scale) {
  extern __shared__ float scores[];  // [capacity]
  __shared__ float query[kMaxHeadDim];
  __shared__ float partials[kWarps];
  __shared__ float out_parts[kThreads];
  const int b = blockIdx.x / heads, h = blockIdx.x % heads;
  const int W = heads * head_dim;
  const int now = positions[b];
  const __nv_bfloat16* fresh = qkv + static_cast<std::int64_t>(b) * 3 * W;
  __nv_bfloat16* sequence = cache + static_cast<std::int64_t>(b) * capacity * 3 * W;
  for (int d = threadIdx.x; d < head_dim; d += kThreads) {
    sequence[static_cast<std::int64_t>(now) * 3 * W + W + h * head_dim + d] = fresh[W + h * head_dim + d];
    sequence[static_cast<std::int64_t>(now) * 3 * W + 2 * W + h * head_dim + d] = fresh[2 * W + h * head_dim + d];
    query[d] = to_float(fresh[h * head_dim + d]) * scale;
  }
  __syncthreads();

  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  float local_max = -INFINITY;
  for (int t = warp; t <= now; t += kWarps) {
    const __nv_bfloat16* key = sequence + static_cast<std::int64_t>(t) * 3 * W + W + h * head_dim;
    float dot = 0.0f;
    for (int d = lane; d < head_dim; d += kWarp) dot += query[d] * to_float(key[d]);
    dot = warp_sum(dot);
    if (lane == 0) scores[t] = dot;
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

  const int groups = kThreads / head_dim;  // head_dim <= kThreads
  const int group = threadIdx.x / head_dim, d = threadIdx.x % head_dim;
  float sum = 0.0f;
  if (group < groups) {
    for (int t = group; t <= now; t += groups) {
      sum += scores[t] * to_float(sequence[static_cast<std::int64_t>(t) * 3 * W + 2 * W + h * head_dim + d]);
    }
  }
  out_parts[threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.x < head_dim) {
    float value = 0.0f;
    for (int g = 0; g < groups; ++g) value += out_parts[g * head_dim + threadIdx.x];
    out[(static_cast<std::int64_t>(b) * heads + h) * head_dim + threadIdx.x] = __float2bfloat16_rn(value / total);
  }
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
  static_assert(kMaxHeadDim <= kThreads, "one thread per dimension in the value sum");
  if (head_dim < 1 || head_dim > kMaxHeadDim) return cudaErrorInvalidValue;
  const std::size_t score_bytes = static_cast<std::size_t>(capacity) * sizeof(float);
  // Above 48 KB a kernel must opt in to more shared memory.
  const cudaError_t status = cudaFuncSetAttribute(decode_attention_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                  static_cast<int>(score_bytes));
  if (status != cudaSuccess) return status;
  const float scale = 1.0f / sqrtf(static_cast<float>(head_dim));
  decode_attention_kernel<<<static_cast<unsigned>(batch) * static_cast<unsigned>(heads), kThreads, score_bytes,
                            stream>>>(static_cast<const __nv_bfloat16*>(qkv), static_cast<__nv_bfloat16*>(cache),
                                      positions, static_cast<__nv_bfloat16*>(out), heads, head_dim, capacity, scale);
  return cudaGetLastError();
}

}  // namespace adamant::kernels::cuda::launchers
