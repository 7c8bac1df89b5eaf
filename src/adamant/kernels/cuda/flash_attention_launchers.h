#pragma once
// Plain launch functions behind the CUDA flash attention kernels (raw pointers,
// sizes, a stream; no Tensor or fmt, so that nvcc compiles the *.cu files).
// flash_attention_cuda.cpp checks the Tensors and calls these; each returns the
// launch status. Problem and Dropout are the ones of the probability-based
// kernels (attention_launchers.h), so both families drop the same elements.
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdint>

#include "adamant/kernels/cuda/attention_launchers.h"

namespace adamant::kernels::cuda::flash_attention_launchers {

using attention_launchers::Dropout;
using attention_launchers::Problem;

// head_dim must be one of these. Beyond the probability kernels' 64 and 128, flash
// attention is instantiated for 80 (GPT-3 2.7B: 2560 / 32 heads) and 96; its tiles
// take any multiple of 16 (flash_detail::supported_tiles).
inline constexpr std::array<std::int64_t, 4> kSupportedHeadDims{64, 80, 96, 128};
constexpr bool supported_head_dim(std::int64_t head_dim) {
  return std::find(kSupportedHeadDims.begin(), kSupportedHeadDims.end(), head_dim) != kSupportedHeadDims.end();
}

// 16-bit arrays hold bf16 bit patterns and must be 16-byte aligned; logsumexp is
// fp32 [batch, heads, seq] (natural log of each row's softmax denominator of the
// scaled scores, maximum included), 4-byte aligned.
struct ForwardOperands {
  const std::uint16_t* qkv;  // [batch, seq, 3, heads, head_dim]
  std::uint16_t* out;        // [batch, seq, heads, head_dim]
  float* logsumexp;          // [batch, heads, seq]
};

struct BackwardOperands {
  const std::uint16_t* d_out;
  const std::uint16_t* qkv;
  const std::uint16_t* out;
  const float* logsumexp;
  std::uint16_t* d_qkv;  // overwritten; its query part is scratch until dq is written
};

cudaError_t flash_attention_forward(const ForwardOperands& operands, const Problem& problem, const Dropout& dropout,
                                    cudaStream_t stream);
cudaError_t flash_attention_backward(const BackwardOperands& operands, const Problem& problem, const Dropout& dropout,
                                     cudaStream_t stream);

}  // namespace adamant::kernels::cuda::flash_attention_launchers
