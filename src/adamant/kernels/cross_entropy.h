#pragma once
// Softmax cross-entropy, alone and fused with the (tied) output layer. The fused
// form walks the rows in chunks so that [rows, vocab] logits never exist at once.
#include <cstdint>

#include "adamant/core/stream.h"
#include "adamant/core/tensor.h"

namespace adamant::kernels {

// In place on logits [rows, vocab]: losses[r] = logsumexp(logits[r]) - logits[r, targets[r]];
// when with_grad, logits[r] is replaced by grad_scale * (softmax(logits[r]) - onehot(targets[r])).
// targets: i32 in [0, vocab).
void softmax_cross_entropy(Tensor logits, const Tensor& targets, Tensor losses, std::int64_t rows, std::int64_t vocab,
                           bool with_grad, double grad_scale, const Stream& stream);

struct ClassifierShape {
  std::int64_t rows = 0;
  std::int64_t channels = 0;
  std::int64_t vocab = 0;
};

// logits = x[rows, channels] * embedding[vocab, channels]^T, losses [rows] as above, computed
// chunk_rows = logits_scratch.numel() / vocab rows at a time. When d_x is non-empty, also
// with g = grad_scale * dloss_r/dlogits: d_x = g * embedding (overwritten) and
// d_embedding (+)= g^T * x (accumulated onto its old value when accumulate_d_embedding).
void fused_classifier(const Tensor& x, const Tensor& embedding, const Tensor& targets, Tensor losses,
                      Tensor logits_scratch, double grad_scale, Tensor d_x, Tensor d_embedding,
                      bool accumulate_d_embedding, const ClassifierShape& shape, const Stream& stream);

}  // namespace adamant::kernels
