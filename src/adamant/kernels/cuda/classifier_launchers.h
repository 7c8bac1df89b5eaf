#pragma once
// Plain launch functions of the classifier kernels (classifier_kernels.cu): raw
// pointers, sizes and a stream, no Tensor or fmt, so that nvcc compiles them (see
// launchers.h). Each returns the launch status for the caller to turn into an
// adamant::Error.
#include <cuda_runtime.h>

#include <cstdint>

#include "adamant/core/dtype.h"

namespace adamant::kernels::cuda::launchers {

// What softmax_cross_entropy writes besides the losses.
enum class CrossEntropyGradient : std::uint8_t {
  none,
  // logits[r, v] = grad_scale * (softmax(logits[r])[v] - onehot(targets[r])[v]), fp32 in place.
  f32_in_place,
  // The same gradient rounded to bf16, written over the front of each row's own storage:
  // in place for bf16 logits (row stride vocab); for fp32 logits over the front half of
  // the row, row r's bf16 values starting at byte 4 * r * vocab, so that the bf16 matrix
  // has a row stride of 2 * vocab elements. Lets a GEMM read the gradient in bf16
  // without a second buffer.
  bf16_in_row,
};

// How the loss-and-gradient kernel reads a row it needs twice (for the loss, then for
// its gradient). The two add a row's terms in different orders, so their results differ
// in the last bits.
enum class RowReads : std::uint8_t {
  // Once from global memory into the shared memory of a cluster of two blocks, where a
  // row is whole 16-byte groups (vocab % 4 == 0 for fp32 logits, % 8 for bf16), the
  // logits are 16-byte aligned and half a row fits in half a multiprocessor's shared
  // memory (vocab up to 57,344 fp32 or 114,688 bf16 logits on Hopper); twice from global
  // memory otherwise.
  once_where_it_fits,
  // Twice from global memory (the form for larger rows; benchmarks compare the two).
  twice,
};

// Per row r of logits [rows, vocab] (logits_dtype: fp32, or bf16 with the gradient
// bf16_in_row or none; every sum in fp32): losses[r] = logsumexp(logits[r]) -
// logits[r, targets[r]], one pass over the row for the max and the sum; then the
// gradient as `gradient` says. A target outside [0, vocab) gives a NaN loss (and no
// one-hot term) instead of an out-of-bounds read. Another dtype, or bf16 logits with
// f32_in_place, is cudaErrorInvalidValue.
cudaError_t softmax_cross_entropy(void* logits, DType logits_dtype, const std::int32_t* targets, float* losses,
                                  std::int64_t rows, std::int64_t vocab, CrossEntropyGradient gradient,
                                  float grad_scale, cudaStream_t stream, RowReads reads = RowReads::once_where_it_fits);

// The same row walk over a vocabulary slice (logits fp32 or bf16): the rows of logits [rows, vocab] are the
// columns [vocab_start, vocab_start + vocab) of the whole vocabulary, which targets
// index. slice_lse[r] = logsumexp(logits[r]); target_logit[r] = logits[r, targets[r] -
// vocab_start] when that column is in the slice, else 0. The logits are left as they were.
cudaError_t vocab_slice_statistics(void* logits, DType logits_dtype, const std::int32_t* targets,
                                   std::int64_t vocab_start, float* slice_lse, float* target_logit, std::int64_t rows,
                                   std::int64_t vocab, cudaStream_t stream);

// The gradient of a vocabulary slice from the whole vocabulary's lse[r] (no reduction):
// grad_scale * (exp(logits[r, v] - lse[r]) - onehot), the one-hot only where targets[r]
// falls in the slice, written as `gradient` says (f32_in_place or bf16_in_row).
cudaError_t vocab_slice_gradient(void* logits, DType logits_dtype, const std::int32_t* targets,
                                 std::int64_t vocab_start, const float* lse, std::int64_t rows, std::int64_t vocab,
                                 CrossEntropyGradient gradient, float grad_scale, cudaStream_t stream);

// gathered [tp_size, 2, rows]: per rank, its slice_lse then its target_logit rows. lse[r] =
// logsumexp over ranks of the slice_lse; losses[r] = lse[r] - sum over ranks of target_logit.
cudaError_t vocab_parallel_combine(const float* gathered, int tp_size, std::int64_t rows, float* losses, float* lse,
                                   cudaStream_t stream);

}  // namespace adamant::kernels::cuda::launchers
