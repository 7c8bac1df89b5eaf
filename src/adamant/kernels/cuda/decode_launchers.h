#pragma once
// Raw-pointer launchers of the decoding-step kernels (decode.cu), bf16 data; the
// Tensor-level entry points are in decode_cuda.cpp.
#include <cuda_runtime.h>

#include <cstdint>

namespace adamant::kernels::cuda::launchers {

constexpr int kMaxHeadDim = 128;               // kernels/decode.h's kMaxDecodeHeadDim
constexpr int kMaxDecodeCapacity = 40 * 1024;  // cached positions: fp32 scores in shared memory

cudaError_t decode_embedding(const std::int32_t* tokens, const std::int32_t* positions, const void* word,
                             const void* position, void* out, std::int64_t batch, std::int64_t channels,
                             std::int64_t vocab, std::int64_t places, cudaStream_t stream);
cudaError_t decode_attention(const void* qkv, void* cache, const std::int32_t* positions, void* out, int batch,
                             int capacity, int heads, int head_dim, cudaStream_t stream);

}  // namespace adamant::kernels::cuda::launchers
