#pragma once
// Softmax cross-entropy, alone and fused with the (tied) output layer. The fused
// form walks the rows in chunks so that [rows, vocab] logits never exist at once.
#include <cstddef>
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

// ---- vocabulary-parallel classifier (Megatron's tensor parallelism of the output layer) ----
// Each of tp_size ranks holds a slice of the tied embedding, [vocab_start, vocab_start +
// vocab) of the padded vocabulary, and all of x. One loss needs every slice: each rank
// reduces its slice to two numbers per row (stats), the ranks all-gather them, combine
// gives the losses and the row's log-sum-exp, and backward recomputes the slice's logits.
// Dtypes as fused_classifier: on a GPU x, embedding and d_x bf16, d_embedding, stats,
// gathered, losses, lse and logits_scratch fp32; on the CPU all in the compute dtype.

// Logits per chunk of the classifiers' logits_scratch that suits `device`: about 8M on the
// CPU (32 MiB in fp32), 32M on a GPU (128 MiB), where a longer inner dimension of the
// embedding-gradient GEMM pays off.
std::size_t classifier_chunk_elements(Device device);

struct VocabParallelShape {
  std::int64_t rows = 0;
  std::int64_t channels = 0;
  std::int64_t vocab = 0;  // rows of this rank's slice of the embedding
  std::int64_t vocab_start = 0;
};

// stats [2, rows]: stats[0, r] = logsumexp over the slice of x_r . e_v; stats[1, r] =
// x_r . e_{targets[r]} when the target falls in the slice, else 0. targets: i32 ids of the
// whole vocabulary (>= 0). Works in chunks of logits_scratch.numel() / vocab rows.
void vocab_parallel_classifier_stats(const Tensor& x, const Tensor& embedding, const Tensor& targets, Tensor stats,
                                     Tensor logits_scratch, const VocabParallelShape& shape, const Stream& stream);

// gathered [tp_size, 2, rows]: every rank's stats, in rank order. lse[r] =
// logsumexp over t of gathered[t, 0, r]; losses[r] = lse[r] - sum over t of gathered[t, 1, r].
void vocab_parallel_combine(const Tensor& gathered, int tp_size, std::int64_t rows, Tensor losses, Tensor lse,
                            const Stream& stream);

// Recomputes the slice's logits chunk by chunk: g = grad_scale * (exp(x_r . e_v - lse[r]) -
// onehot), the one-hot only where the target is in the slice; d_x = g e (overwritten: this
// slice's part, to be summed over the ranks) and d_embedding (+)= g^T x (accumulated onto
// its old value when accumulate_d_embedding, else overwritten).
void vocab_parallel_classifier_backward(const Tensor& x, const Tensor& embedding, const Tensor& targets,
                                        const Tensor& lse, double grad_scale, Tensor logits_scratch, Tensor d_x,
                                        Tensor d_embedding, bool accumulate_d_embedding,
                                        const VocabParallelShape& shape, const Stream& stream);

}  // namespace adamant::kernels
