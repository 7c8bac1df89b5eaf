#pragma once
// Kernels of one decoding step with a key/value cache: every sequence of a batch adds
// one token at its own position. The prompt itself goes through the training kernels
// (flash attention); these handle the single new row per sequence.
//
// Dtypes: on a GPU the activations, weights and the cache are bf16; on the CPU every
// floating operand is fp32 or fp64 (one dtype). tokens and positions are i32 on the
// operands' device.
#include <cstdint>

#include "adamant/core/stream.h"
#include "adamant/core/tensor.h"

namespace adamant::kernels {

struct DecodeShape {
  std::int64_t batch = 0;     // sequences, one new token each
  std::int64_t capacity = 0;  // cached positions per sequence
  std::int64_t heads = 0;
  std::int64_t head_dim = 0;  // at most kMaxDecodeHeadDim
};

constexpr std::int64_t kMaxDecodeHeadDim = 128;

// out[b] = word[tokens[b]] + position[positions[b]] for b < batch; out [batch, channels].
void decode_embedding(const Tensor& tokens, const Tensor& positions, const Tensor& word, const Tensor& position,
                      Tensor out, std::int64_t batch, std::int64_t channels, const Stream& stream);

// qkv [batch, 3, heads, head_dim]: the new token's query, key and value. cache [batch, capacity,
// 3, heads, head_dim] (the layout of a prompt's qkv, so a prompt's projection is written into
// it directly; the query slots are unused). Stores the key and value of sequence b at
// cache[b, positions[b]], then out[b, h] = softmax(q . k_t / sqrt(head_dim)) v_t over
// t = 0..positions[b]; out [batch, heads, head_dim]. positions[b] < capacity.
void decode_attention(const Tensor& qkv, Tensor cache, const Tensor& positions, Tensor out, const DecodeShape& shape,
                      const Stream& stream);

}  // namespace adamant::kernels
