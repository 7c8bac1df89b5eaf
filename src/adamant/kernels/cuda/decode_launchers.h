#pragma once
// Raw-pointer launchers of the decoding-step kernels (decode.cu), bf16 data; the
// Tensor-level entry points are in decode_cuda.cpp.
#include <cuda_runtime.h>

#include <cstdint>

namespace adamant::kernels::cuda::launchers {

constexpr int kMaxHeadDim = 128;               // kernels/decode.h's kMaxDecodeHeadDim
constexpr int kMaxDecodeCapacity = 40 * 1024;  // cached positions: fp32 scores in shared memory

constexpr int kMaxGemvRows = 8;  // kernels/decode.h's kMaxDecodeGemvRows
constexpr int kMaxTopK = 256;    // kernels/decode.h's kMaxDecodeTopK

enum class DecodeLinearEpilogue { none, gelu, residual };

// decode_linear.cu: bf16 in [rows, in_features], weight [out_features, in_features], bias and
// residual (nullptr: none) and out [rows, out_features] in bf16, or out fp32 when fp32_out.
// rows 1..kMaxGemvRows; in_features a multiple of 8 and in/weight 16-byte aligned.
struct DecodeLinearProblem {
  const void* in = nullptr;
  const void* weight = nullptr;
  const void* bias = nullptr;
  const void* residual = nullptr;
  void* out = nullptr;
  bool fp32_out = false;
  int rows = 0, in_features = 0, out_features = 0;
  DecodeLinearEpilogue epilogue = DecodeLinearEpilogue::none;
  bool tanh_gelu = false;
};

cudaError_t decode_linear(const DecodeLinearProblem& problem, cudaStream_t stream);
// decode_top_k.cu: logits fp32 [rows, row_stride]; values fp32 and ids [rows, k].
cudaError_t decode_top_k(const float* logits, float* values, std::int32_t* ids, int rows, std::int64_t row_stride,
                         int vocab, int k, int masked, cudaStream_t stream);

cudaError_t decode_embedding(const std::int32_t* tokens, const std::int32_t* positions, const void* word,
                             const void* position, void* out, std::int64_t batch, std::int64_t channels,
                             std::int64_t vocab, std::int64_t places, cudaStream_t stream);
cudaError_t decode_attention(const void* qkv, void* cache, const std::int32_t* positions, void* out, int batch,
                             int capacity, int heads, int head_dim, cudaStream_t stream);

}  // namespace adamant::kernels::cuda::launchers
