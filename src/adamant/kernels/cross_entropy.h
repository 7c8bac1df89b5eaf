#pragma once
// Softmax cross-entropy, alone and fused with the (tied) output layer. The fused
// form walks the rows in chunks so that [rows, vocab] logits never exist at once.
#include <cstddef>
#include <cstdint>

#include "adamant/core/stream.h"
#include "adamant/core/tensor.h"
#include "adamant/kernels/dispatch.h"

namespace adamant::kernels {

struct ClassifierShape {
  std::int64_t rows = 0;
  std::int64_t channels = 0;
  std::int64_t vocab = 0;
};

struct VocabParallelShape {
  std::int64_t rows = 0;
  std::int64_t channels = 0;
  std::int64_t vocab = 0;  // rows of this rank's slice of the embedding
  std::int64_t vocab_start = 0;
};

namespace cpu {
void softmax_cross_entropy(Tensor logits, const Tensor& targets, Tensor losses, std::int64_t rows, std::int64_t vocab,
                           bool with_grad, double grad_scale);
void fused_classifier(const Tensor& x, const Tensor& embedding, const Tensor& targets, Tensor losses,
                      Tensor logits_scratch, double grad_scale, Tensor d_x, Tensor d_embedding,
                      bool accumulate_d_embedding, const ClassifierShape& shape);
void vocab_parallel_classifier_stats(const Tensor& x, const Tensor& embedding, const Tensor& targets, Tensor stats,
                                     Tensor logits_scratch, const VocabParallelShape& shape);
void vocab_parallel_combine(const Tensor& gathered, int tp_size, std::int64_t rows, Tensor losses, Tensor lse);
void vocab_parallel_classifier_backward(const Tensor& x, const Tensor& embedding, const Tensor& targets,
                                        const Tensor& lse, double grad_scale, Tensor logits_scratch, Tensor d_x,
                                        Tensor d_embedding, bool accumulate_d_embedding,
                                        const VocabParallelShape& shape);
}  // namespace cpu

namespace cuda {
void softmax_cross_entropy(Tensor logits, const Tensor& targets, Tensor losses, std::int64_t rows, std::int64_t vocab,
                           bool with_grad, double grad_scale, const Stream& stream);
void fused_classifier(const Tensor& x, const Tensor& embedding, const Tensor& targets, Tensor losses,
                      Tensor logits_scratch, double grad_scale, Tensor d_x, Tensor d_embedding,
                      bool accumulate_d_embedding, const ClassifierShape& shape, Workspace& workspace,
                      const Stream& stream);
void vocab_parallel_classifier_stats(const Tensor& x, const Tensor& embedding, const Tensor& targets, Tensor stats,
                                     Tensor logits_scratch, const VocabParallelShape& shape, Workspace& workspace,
                                     const Stream& stream);
void vocab_parallel_combine(const Tensor& gathered, int tp_size, std::int64_t rows, Tensor losses, Tensor lse,
                            const Stream& stream);
void vocab_parallel_classifier_backward(const Tensor& x, const Tensor& embedding, const Tensor& targets,
                                        const Tensor& lse, double grad_scale, Tensor logits_scratch, Tensor d_x,
                                        Tensor d_embedding, bool accumulate_d_embedding,
                                        const VocabParallelShape& shape, Workspace& workspace, const Stream& stream);
}  // namespace cuda

namespace detail {

// The classifiers' logits scratch: at least one row of `vocab`, in the statistic dtype, or on
// a GPU with bf16 activations also bf16 (the GEMM then writes bf16 logits and the
// cross-entropy reads them, half the bytes; its sums stay fp32).
inline void check_logits_scratch(const KernelCall& call, const Tensor& x, const Tensor& logits_scratch,
                                 std::int64_t vocab) {
  const bool bf16_logits = call.on_cuda() && x.dtype == DType::bf16 && logits_scratch.dtype == DType::bf16;
  call.at_least("logits_scratch", logits_scratch, vocab,
                bf16_logits ? DType::bf16 : call.dtype(Role::statistic));  // at least one row per chunk
}

inline void check_targets(const KernelCall& call, const Tensor& targets, std::int64_t rows, std::int64_t vocab) {
  call.exact("targets", targets, rows, DType::i32);
  if (!targets.device.is_cpu()) return;
  for (const std::int32_t id : targets.span<std::int32_t>()) {
    ADAMANT_CHECK(id >= 0 && id < vocab, "{}: target id {} outside the vocabulary [0, {})", call.op(), id, vocab);
  }
}

// Shapes and targets of the vocabulary-parallel classifier; targets index the whole
// vocabulary, so a target beyond this slice is another rank's, and only a negative one is wrong.
inline void check_vocab_parallel(const KernelCall& call, const Tensor& x, const Tensor& embedding,
                                 const Tensor& targets, const Tensor& logits_scratch, const VocabParallelShape& shape) {
  ADAMANT_CHECK(shape.rows >= 0, "{}: {} rows", call.op(), shape.rows);
  call.positive("channels", shape.channels);
  call.positive("vocab", shape.vocab);
  ADAMANT_CHECK(shape.vocab_start >= 0, "{}: vocab_start {} is negative", call.op(), shape.vocab_start);
  call.exact("x", x, shape.rows * shape.channels, Role::activation);
  call.exact("embedding", embedding, shape.vocab * shape.channels, Role::weight);
  call.exact("targets", targets, shape.rows, DType::i32);
  check_logits_scratch(call, x, logits_scratch, shape.vocab);
  if (!targets.device.is_cpu()) return;
  for (const std::int32_t id : targets.span<std::int32_t>()) {
    ADAMANT_CHECK(id >= 0, "{}: target id {} is negative", call.op(), id);
  }
}

}  // namespace detail

// In place on logits [rows, vocab]: losses[r] = logsumexp(logits[r]) - logits[r, targets[r]];
// when with_grad, logits[r] is replaced by grad_scale * (softmax(logits[r]) - onehot(targets[r])).
// targets: i32 in [0, vocab). Logits fp32 (the statistic dtype), or bf16 on a GPU: the sums
// in fp32 and the gradient rounded to bf16 in place.
inline void softmax_cross_entropy(Tensor logits, const Tensor& targets, Tensor losses, std::int64_t rows,
                                  std::int64_t vocab, bool with_grad, double grad_scale, const Stream& stream) {
  const KernelCall call = KernelCall::model("softmax_cross_entropy", logits, stream);
  call.positive("vocab", vocab);
  call.exact("logits", logits, rows * vocab,
             call.on_cuda() && logits.dtype == DType::bf16 ? DType::bf16 : call.dtype(Role::statistic));
  detail::check_targets(call, targets, rows, vocab);
  call.exact("losses", losses, rows, Role::statistic);
  call.run([&] { cpu::softmax_cross_entropy(logits, targets, losses, rows, vocab, with_grad, grad_scale); },
           ADAMANT_CUDA_CALL(
               cuda::softmax_cross_entropy(logits, targets, losses, rows, vocab, with_grad, grad_scale, stream)));
}

// logits = x[rows, channels] * embedding[vocab, channels]^T, losses [rows] as above, computed
// chunk_rows = logits_scratch.numel() / vocab rows at a time. When d_x is non-empty, also
// with g = grad_scale * dloss_r/dlogits: d_x = g * embedding (overwritten) and
// d_embedding (+)= g^T * x (accumulated onto its old value when accumulate_d_embedding).
// The logits are rounded to the scratch's dtype: fp32, or on a GPU with bf16 x also bf16 (as
// Megatron's bf16 output layer; the cross-entropy's sums are fp32 either way).
// `workspace`: made with WorkspaceNeeds::matmul for `stream`, as for the two below.
inline void fused_classifier(const Tensor& x, const Tensor& embedding, const Tensor& targets, Tensor losses,
                             Tensor logits_scratch, double grad_scale, Tensor d_x, Tensor d_embedding,
                             bool accumulate_d_embedding, const ClassifierShape& shape, Workspace& workspace,
                             const Stream& stream) {
  const KernelCall call = KernelCall::model("fused_classifier", x, stream);
  call.uses_matmul(workspace);
  call.positive("channels", shape.channels);
  call.positive("vocab", shape.vocab);
  call.exact("x", x, shape.rows * shape.channels, Role::activation);
  call.exact("embedding", embedding, shape.vocab * shape.channels, Role::weight);
  detail::check_targets(call, targets, shape.rows, shape.vocab);
  call.exact("losses", losses, shape.rows, Role::statistic);
  detail::check_logits_scratch(call, x, logits_scratch, shape.vocab);
  if (d_x.data != nullptr) {
    call.exact("d_x", d_x, shape.rows * shape.channels, Role::activation);
    call.exact("d_embedding", d_embedding, shape.vocab * shape.channels, Role::buffer_grad);
  }
  call.run(
      [&] {
        cpu::fused_classifier(x, embedding, targets, losses, logits_scratch, grad_scale, d_x, d_embedding,
                              accumulate_d_embedding, shape);
      },
      ADAMANT_CUDA_CALL(cuda::fused_classifier(x, embedding, targets, losses, logits_scratch, grad_scale, d_x,
                                               d_embedding, accumulate_d_embedding, shape, workspace, stream)));
}

// ---- vocabulary-parallel classifier (Megatron's tensor parallelism of the output layer) ----
// Each of tp_size ranks holds a slice of the tied embedding, [vocab_start, vocab_start +
// vocab) of the padded vocabulary, and all of x. One loss needs every slice: each rank
// reduces its slice to two numbers per row (stats), the ranks all-gather them, combine
// gives the losses and the row's log-sum-exp, and backward recomputes the slice's logits.
// Dtypes as fused_classifier: on a GPU x, embedding and d_x bf16, d_embedding, stats,
// gathered, losses and lse fp32, logits_scratch fp32 or bf16; on the CPU all in the compute dtype.

// Logits per chunk of the classifiers' logits_scratch that suits `device`: about 8M on the
// CPU (32 MiB in fp32), 512M on a GPU (1 GiB in bf16). Each chunk reads and writes the whole
// fp32 embedding gradient once (d_embedding += g^T x_chunk), 8 bytes per vocab x channel, and
// makes a logits GEMM and a gradient GEMM of its own: at GPT-2's vocabulary of 50,304 a GPU
// chunk is 10,672 rows, so a micro-batch of 16,384 tokens takes two. On an H100, GPT-3 126M
// at micro-batch 8 trained 1.3% faster (2.1% with dropout) than with 2^27 (seven chunks), for
// 0.7-0.8 GiB more; 2^30 (one chunk) gained 0.3% more for another 0.5 GiB.
inline std::size_t classifier_chunk_elements(Device device) {
  return device.is_cuda() ? std::size_t{1} << 29 : std::size_t{1} << 23;
}

// stats [2, rows]: stats[0, r] = logsumexp over the slice of x_r . e_v; stats[1, r] =
// x_r . e_{targets[r]} when the target falls in the slice, else 0. targets: i32 ids of the
// whole vocabulary (>= 0). Works in chunks of logits_scratch.numel() / vocab rows.
inline void vocab_parallel_classifier_stats(const Tensor& x, const Tensor& embedding, const Tensor& targets,
                                            Tensor stats, Tensor logits_scratch, const VocabParallelShape& shape,
                                            Workspace& workspace, const Stream& stream) {
  const KernelCall call = KernelCall::model("vocab_parallel_classifier_stats", x, stream);
  call.uses_matmul(workspace);
  detail::check_vocab_parallel(call, x, embedding, targets, logits_scratch, shape);
  call.exact("stats", stats, 2 * shape.rows, Role::statistic);
  call.run([&] { cpu::vocab_parallel_classifier_stats(x, embedding, targets, stats, logits_scratch, shape); },
           ADAMANT_CUDA_CALL(cuda::vocab_parallel_classifier_stats(x, embedding, targets, stats, logits_scratch, shape,
                                                                   workspace, stream)));
}

// gathered [tp_size, 2, rows]: every rank's stats, in rank order. lse[r] =
// logsumexp over t of gathered[t, 0, r]; losses[r] = lse[r] - sum over t of gathered[t, 1, r].
inline void vocab_parallel_combine(const Tensor& gathered, int tp_size, std::int64_t rows, Tensor losses, Tensor lse,
                                   const Stream& stream) {
  const KernelCall call = KernelCall::model("vocab_parallel_combine", losses, stream);
  call.positive("tp_size", tp_size);
  ADAMANT_CHECK(rows >= 0, "{}: {} rows", call.op(), rows);
  call.exact("gathered", gathered, tp_size * 2 * rows, Role::statistic);
  call.exact("losses", losses, rows, Role::statistic);
  call.exact("lse", lse, rows, Role::statistic);
  call.run([&] { cpu::vocab_parallel_combine(gathered, tp_size, rows, losses, lse); },
           ADAMANT_CUDA_CALL(cuda::vocab_parallel_combine(gathered, tp_size, rows, losses, lse, stream)));
}

// Recomputes the slice's logits chunk by chunk: g = grad_scale * (exp(x_r . e_v - lse[r]) -
// onehot), the one-hot only where the target is in the slice; d_x = g e (overwritten: this
// slice's part, to be summed over the ranks) and d_embedding (+)= g^T x (accumulated onto
// its old value when accumulate_d_embedding, else overwritten).
inline void vocab_parallel_classifier_backward(const Tensor& x, const Tensor& embedding, const Tensor& targets,
                                               const Tensor& lse, double grad_scale, Tensor logits_scratch, Tensor d_x,
                                               Tensor d_embedding, bool accumulate_d_embedding,
                                               const VocabParallelShape& shape, Workspace& workspace,
                                               const Stream& stream) {
  const KernelCall call = KernelCall::model("vocab_parallel_classifier_backward", x, stream);
  call.uses_matmul(workspace);
  detail::check_vocab_parallel(call, x, embedding, targets, logits_scratch, shape);
  call.exact("lse", lse, shape.rows, Role::statistic);
  call.exact("d_x", d_x, shape.rows * shape.channels, Role::activation);
  call.exact("d_embedding", d_embedding, shape.vocab * shape.channels, Role::buffer_grad);
  call.run(
      [&] {
        cpu::vocab_parallel_classifier_backward(x, embedding, targets, lse, grad_scale, logits_scratch, d_x,
                                                d_embedding, accumulate_d_embedding, shape);
      },
      ADAMANT_CUDA_CALL(cuda::vocab_parallel_classifier_backward(x, embedding, targets, lse, grad_scale, logits_scratch,
                                                                 d_x, d_embedding, accumulate_d_embedding, shape,
                                                                 workspace, stream)));
}

}  // namespace adamant::kernels
