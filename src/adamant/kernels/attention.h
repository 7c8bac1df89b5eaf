#pragma once
// Causal multi-head self-attention with the softmax materialised: the readable CPU
// reference of flash attention (kernels/flash_attention.h), which the model uses.
// Tests compare the CPU and CUDA flash kernels against it.
#include <cstdint>

#include "adamant/core/tensor.h"
#include "adamant/kernels/dropout.h"

namespace adamant::kernels {

struct AttentionShape {
  std::int64_t batch = 0;
  std::int64_t seq = 0;
  std::int64_t heads = 0;
  std::int64_t head_dim = 0;
};

namespace cpu {

// qkv [batch, seq, 3, heads, head_dim] (all queries, then keys, then values of a token);
// probs [batch, heads, seq, seq] = softmax(q k^T / sqrt(head_dim)) with future positions 0;
// out [batch, seq, heads, head_dim] = dropout(probs) * v, dropout drawn as
// kernels/attention_dropout_layout.h lays out; probs are stored before dropout. Every
// operand fp32 or fp64 on the CPU, alike.
void attention_forward(const Tensor& qkv, Tensor probs, Tensor out, const AttentionShape& shape,
                       const DropoutArgs& dropout_args);

// d_qkv (overwritten) from d_out; d_probs_scratch has probs' size and holds intermediate values.
void attention_backward(const Tensor& d_out, const Tensor& qkv, const Tensor& probs, Tensor d_probs_scratch,
                        Tensor d_qkv, const AttentionShape& shape, const DropoutArgs& dropout_args);

}  // namespace cpu

}  // namespace adamant::kernels
