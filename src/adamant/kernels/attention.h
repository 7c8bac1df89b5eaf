#pragma once
// Causal multi-head self-attention core (after the fused QKV projection, before
// the output projection). Plain softmax attention: probabilities are kept for backward.
#include <cstdint>

#include "adamant/core/stream.h"
#include "adamant/core/tensor.h"
#include "adamant/kernels/dropout.h"

namespace adamant::kernels {

struct AttentionShape {
  std::int64_t batch = 0;
  std::int64_t seq = 0;
  std::int64_t heads = 0;
  std::int64_t head_dim = 0;
};

// qkv [batch, seq, 3, heads, head_dim] (all queries, then keys, then values of a token);
// probs [batch, heads, seq, seq] = softmax(q k^T / sqrt(head_dim)) with future positions 0;
// out [batch, seq, heads, head_dim] = dropout(probs) * v. Attention dropout element of a
// sample is (head * seq + query) * seq + key; probs are stored before dropout.
void attention_forward(const Tensor& qkv, Tensor probs, Tensor out, const AttentionShape& shape,
                       const DropoutArgs& dropout_args, const Stream& stream);

// d_qkv (overwritten) from d_out; d_probs_scratch has probs' size and holds intermediate values.
void attention_backward(const Tensor& d_out, const Tensor& qkv, const Tensor& probs, Tensor d_probs_scratch,
                        Tensor d_qkv, const AttentionShape& shape, const DropoutArgs& dropout_args,
                        const Stream& stream);

}  // namespace adamant::kernels
