#pragma once
// Token + learned absolute position embeddings (GPT-2/GPT-3), optionally over a
// vocabulary-parallel slice of the word table (Megatron's VocabParallelEmbedding:
// each tensor-parallel rank looks up the tokens of its slice, the ranks' outputs
// are summed).
#include <cstdint>

#include "adamant/core/stream.h"
#include "adamant/core/tensor.h"

namespace adamant::kernels {

struct EmbeddingShape {
  std::int64_t batch = 0;
  std::int64_t seq = 0;
  std::int64_t channels = 0;
  std::int64_t vocab = 0;        // rows of `word`: the (padded) vocabulary, or this rank's slice of it
  std::int64_t vocab_start = 0;  // `word` holds rows [vocab_start, vocab_start + vocab) of the whole table
};

// out[b, t] = word[tokens[b, t] - vocab_start] + position[t], with a zero word row for a
// token outside [vocab_start, vocab_start + vocab). tokens: i32 [batch, seq], ids >= 0.
// An empty position (data == nullptr) adds no position embedding (all but one
// tensor-parallel rank, so that the sum over ranks adds it once).
void embedding_forward(const Tensor& tokens, const Tensor& word, const Tensor& position, Tensor out,
                       const EmbeddingShape& shape, const Stream& stream);

// d_word[tokens[b, t] - vocab_start] += d_out[b, t] for the tokens of the slice, and
// d_position[t] += sum over b of d_out[b, t] (both accumulate: the word table is shared
// with the output layer). An empty d_position (data == nullptr) is skipped.
void embedding_backward(const Tensor& d_out, const Tensor& tokens, Tensor d_word, Tensor d_position,
                        const EmbeddingShape& shape, const Stream& stream);

}  // namespace adamant::kernels
