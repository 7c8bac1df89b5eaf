#pragma once
// Plain launch functions behind the CUDA attention kernels (raw pointers, sizes, a
// stream; no Tensor or fmt, so that nvcc compiles the *.cu files). attention_cuda.cpp
// checks the Tensors and calls these; each returns the launch status.
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdint>

namespace adamant::kernels::cuda::attention_launchers {

// head_dim must be one of these (the kernels are instantiated per head size).
inline constexpr std::array<std::int64_t, 2> kSupportedHeadDims{64, 128};
constexpr bool supported_head_dim(std::int64_t head_dim) {
  return std::find(kSupportedHeadDims.begin(), kSupportedHeadDims.end(), head_dim) != kSupportedHeadDims.end();
}

struct Problem {
  int batch;
  int seq;
  int heads;
  int head_dim;
};

// Attention dropout as kernels/dropout.h defines it: Philox stream of sample b is
// stream_base + b * stream_per_sample; the element of (head, query, key) in a
// sample is (head * seq + query) * seq + key.
struct Dropout {
  bool enabled;
  float probability;
  float keep_scale;  // 1 / (1 - probability), rounded to fp32 as the CPU reference does
  std::uint64_t seed;
  std::uint64_t stream_base;
  std::uint64_t stream_per_sample;
};

// All 16-bit arrays hold bf16 bit patterns. qkv, out, d_out and d_qkv must be 16-byte
// aligned; probs and d_scores 4-byte aligned.
struct ForwardOperands {
  const std::uint16_t* qkv;  // [batch, seq, 3, heads, head_dim]
  std::uint16_t* probs;      // [batch, heads, seq, seq]
  std::uint16_t* out;        // [batch, seq, heads, head_dim]
};

struct BackwardOperands {
  const std::uint16_t* d_out;
  const std::uint16_t* qkv;
  const std::uint16_t* probs;
  std::uint16_t* d_scores;  // [batch, heads, seq, seq] scratch: gradient of the scaled scores
  std::uint16_t* d_qkv;
};

cudaError_t attention_forward(const ForwardOperands& operands, const Problem& problem, const Dropout& dropout,
                              cudaStream_t stream);
cudaError_t attention_backward(const BackwardOperands& operands, const Problem& problem, const Dropout& dropout,
                               cudaStream_t stream);

}  // namespace adamant::kernels::cuda::attention_launchers
