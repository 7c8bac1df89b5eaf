#pragma once
// Causal multi-head self-attention that keeps no probabilities (FlashAttention-2):
// forward stores the output and each row's logsumexp, backward recomputes the
// probabilities from them tile by tile. The model's attention on both backends: the
// CPU runs the same blocked algorithm as the GPU (kernels/cpu/flash_attention_cpu.cpp),
// so the activations kept for backward are the same. cpu::attention_forward/backward
// (kernels/attention.h) materialise the softmax and are the reference both are tested
// against.
//
// Dtypes: on the CPU every operand has qkv's dtype (fp32 or fp64); on a GPU qkv, out,
// d_out and d_qkv are bf16 (16-byte aligned) and logsumexp fp32, head_dim one of
// kCudaFlashHeadDims.
#include <array>
#include <cstdint>

#include "adamant/core/stream.h"
#include "adamant/core/tensor.h"
#include "adamant/kernels/attention.h"
#include "adamant/kernels/dropout.h"

namespace adamant::kernels {

// The head sizes the CUDA kernels are instantiated for.
inline constexpr std::array<std::int64_t, 4> kCudaFlashHeadDims{64, 80, 96, 128};

// qkv [batch, seq, 3, heads, head_dim]; out [batch, seq, heads, head_dim] =
// dropout(softmax(q k^T / sqrt(head_dim), causal)) v; logsumexp [batch, heads, seq]
// = log sum_{j <= i} exp(q_i . k_j / sqrt(head_dim)). Attention dropout draws as
// kernels/attention_dropout_layout.h lays out.
void flash_attention_forward(const Tensor& qkv, Tensor out, Tensor logsumexp, const AttentionShape& shape,
                             const DropoutArgs& dropout_args, const Stream& stream);

// d_qkv (overwritten, must not overlap the inputs) from d_out, given forward's out
// and logsumexp and the same dropout arguments.
void flash_attention_backward(const Tensor& d_out, const Tensor& qkv, const Tensor& out, const Tensor& logsumexp,
                              Tensor d_qkv, const AttentionShape& shape, const DropoutArgs& dropout_args,
                              const Stream& stream);

// The earlier forward form with a CPU probabilities scratch, which the blocked CPU
// kernel does without: callers that still size and pass one get 0 elements here and
// the scratch is not read.
constexpr std::int64_t flash_forward_cpu_scratch_numel(const AttentionShape&) { return 0; }
inline void flash_attention_forward(const Tensor& qkv, Tensor out, Tensor logsumexp, const Tensor& /*unused scratch*/,
                                    const AttentionShape& shape, const DropoutArgs& dropout_args,
                                    const Stream& stream) {
  flash_attention_forward(qkv, out, logsumexp, shape, dropout_args, stream);
}

namespace cpu {
void flash_attention_forward(const Tensor& qkv, Tensor out, Tensor logsumexp, const AttentionShape& shape,
                             const DropoutArgs& dropout_args);
void flash_attention_backward(const Tensor& d_out, const Tensor& qkv, const Tensor& out, const Tensor& logsumexp,
                              Tensor d_qkv, const AttentionShape& shape, const DropoutArgs& dropout_args);
}  // namespace cpu

namespace cuda {
void flash_attention_forward(const Tensor& qkv, Tensor out, Tensor logsumexp, const AttentionShape& shape,
                             const DropoutArgs& dropout_args, const Stream& stream);
void flash_attention_backward(const Tensor& d_out, const Tensor& qkv, const Tensor& out, const Tensor& logsumexp,
                              Tensor d_qkv, const AttentionShape& shape, const DropoutArgs& dropout_args,
                              const Stream& stream);
}  // namespace cuda

}  // namespace adamant::kernels
