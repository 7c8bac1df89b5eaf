#pragma once
// Causal multi-head self-attention that keeps no probabilities (FlashAttention-2):
// forward stores the output and each row's logsumexp, backward recomputes the
// probabilities from them tile by tile. Same layouts, scale and dropout mask as
// kernels/attention.h, so it replaces attention_forward/backward on a GPU.
//
// Dtypes: on a GPU qkv, out, d_out and d_qkv are bf16 and logsumexp fp32, head_dim
// 64, 80, 96 or 128. On the CPU every operand has qkv's dtype (fp32 or fp64) and the work
// goes through the probability-based CPU kernels, which need `probs_scratch`
// (preallocated by the caller, so that nothing allocates per call); the GPU
// ignores it (pass an empty Tensor).
#include <cstdint>

#include "adamant/core/stream.h"
#include "adamant/core/tensor.h"
#include "adamant/kernels/attention.h"
#include "adamant/kernels/dropout.h"

namespace adamant::kernels {

// Elements of probs_scratch the CPU needs: probabilities for forward, probabilities
// and their gradients for backward.
constexpr std::int64_t flash_forward_cpu_scratch_numel(const AttentionShape& shape) {
  return shape.batch * shape.heads * shape.seq * shape.seq;
}
constexpr std::int64_t flash_backward_cpu_scratch_numel(const AttentionShape& shape) {
  return 2 * flash_forward_cpu_scratch_numel(shape);
}

// qkv [batch, seq, 3, heads, head_dim]; out [batch, seq, heads, head_dim] =
// dropout(softmax(q k^T / sqrt(head_dim), causal)) v; logsumexp [batch, heads, seq]
// = log sum_{j <= i} exp(q_i . k_j / sqrt(head_dim)).
void flash_attention_forward(const Tensor& qkv, Tensor out, Tensor logsumexp, Tensor probs_scratch,
                             const AttentionShape& shape, const DropoutArgs& dropout_args, const Stream& stream);

// d_qkv (overwritten, must not alias the inputs) from d_out, given forward's out
// and logsumexp and the same dropout arguments.
void flash_attention_backward(const Tensor& d_out, const Tensor& qkv, const Tensor& out, const Tensor& logsumexp,
                              Tensor d_qkv, Tensor probs_scratch, const AttentionShape& shape,
                              const DropoutArgs& dropout_args, const Stream& stream);

}  // namespace adamant::kernels
