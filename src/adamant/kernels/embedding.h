#pragma once
// Token + learned absolute position embeddings (GPT-2/GPT-3).
#include <cstdint>

#include "adamant/core/stream.h"
#include "adamant/core/tensor.h"

namespace adamant::kernels {

struct EmbeddingShape {
  std::int64_t batch = 0;
  std::int64_t seq = 0;
  std::int64_t channels = 0;
  std::int64_t vocab = 0;  // rows of the word embedding table (padded vocabulary)
};

// out[b, t] = word[tokens[b, t]] + position[t]; tokens: i32 [batch, seq] in [0, vocab).
void embedding_forward(const Tensor& tokens, const Tensor& word, const Tensor& position, Tensor out,
                       const EmbeddingShape& shape, const Stream& stream);

// d_word[tokens[b, t]] += d_out[b, t] and d_position[t] += sum over b of d_out[b, t]
// (both accumulate: the word table is shared with the output layer).
void embedding_backward(const Tensor& d_out, const Tensor& tokens, Tensor d_word, Tensor d_position,
                        const EmbeddingShape& shape, const Stream& stream);

}  // namespace adamant::kernels
