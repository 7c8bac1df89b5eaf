// The CUDA softmax cross-entropy, the fused (tied) classifier and its vocabulary-parallel form of
// kernels/cross_entropy.h.
//
// fused_classifier walks the rows in chunks of logits_scratch.numel() / vocab:
//   logits (the scratch, fp32 or bf16) = x_chunk embedding^T  cuBLASLt, bf16 in
//   losses, and g = grad_scale * (softmax - onehot)           fp32 sums from the logits
//   d_x_chunk = g embedding,  d_embedding (+)= g^T x_chunk     cuBLASLt, bf16 in
// With bf16 activations the cross-entropy kernel writes g rounded to bf16 over the
// front of each scratch row: in place over bf16 logits, over the front half of an fp32
// row (row stride 2 * vocab), so both gradient GEMMs take bf16 operands without a
// second buffer; in fp32 mode g stays fp32 in place. bf16 logits halve the bytes the
// logits GEMM writes and the cross-entropy reads (model.classifier_logits_dtype).
// The vocabulary-parallel classifier walks its slice of the embedding the same way:
// the statistics pass reduces each chunk's logits to the slice's log-sum-exp and
// target logit, and the backward pass recomputes them and writes g from the whole
// vocabulary's log-sum-exp (the same row kernel without its reduction), then the same
// two gradient GEMMs.
// Every step is enqueued on the caller's stream: nothing waits on the host. The
// dispatchers (kernels/cross_entropy.h) have checked the operands.
#include <algorithm>
#include <cstdint>

#include "adamant/core/error.h"
#include "adamant/kernels/cross_entropy.h"
#include "adamant/kernels/cuda/classifier_launchers.h"
#include "adamant/kernels/cuda/cublaslt_matmul.h"

namespace adamant::kernels::cuda {

namespace {

void launch_cross_entropy(const char* op, void* logits, DType logits_dtype, const std::int32_t* targets, float* losses,
                          std::int64_t rows, std::int64_t vocab, launchers::CrossEntropyGradient gradient,
                          double grad_scale, const Stream& stream) {
  const cudaError_t status =
      launchers::softmax_cross_entropy(logits, logits_dtype, targets, losses, rows, vocab, gradient,
                                       static_cast<float>(grad_scale), stream_handle(stream));
  ADAMANT_CHECK(status == cudaSuccess, "{}: the cross-entropy kernel failed to launch for {} rows of {}: {} ({})", op,
                rows, vocab, cudaGetErrorString(status), static_cast<int>(status));
}

void check_launch(const char* op, const char* kernel, cudaError_t status) {
  ADAMANT_CHECK(status == cudaSuccess, "{}: the {} kernel failed to launch: {} ({})", op, kernel,
                cudaGetErrorString(status), static_cast<int>(status));
}

// One chunk of rows of the (slice of the) classifier: x_chunk [rows, C] against the
// embedding [vocab, C], logits in the scratch (fp32 or bf16) with a row stride of vocab.
struct ClassifierChunk {
  MatrixOperand x;
  MatrixOperand embedding;
  std::int64_t rows = 0;
  std::int64_t channels = 0;
  std::int64_t vocab = 0;
  void* logits = nullptr;
  DType logits_dtype = DType::f32;
};

// logits[rows, vocab] = x_chunk[rows, C] embedding[vocab, C]^T.
void compute_logits(const ClassifierChunk& chunk, Workspace& workspace, const Stream& stream, const char* op) {
  MatmulProblem product;
  product.transpose_b = Transpose::yes;
  product.m = chunk.rows;
  product.n = chunk.vocab;
  product.k = chunk.channels;
  product.a = chunk.x;
  product.b = chunk.embedding;
  product.c = chunk.logits;
  product.c_dtype = chunk.logits_dtype;
  product.c_row_stride = chunk.vocab;
  matmul(product, workspace, stream);
}

// From g in the scratch (bf16 rows at the logits' row pitch: 2 * vocab elements over fp32
// logits, vocab over bf16 ones; or fp32 in place):
// d_x_chunk[rows, C] = g embedding (overwritten, in the activation dtype) and
// d_embedding[vocab, C] = g^T x_chunk + beta * d_embedding (the gradient buffer's fp32 or bf16).
void backpropagate(const ClassifierChunk& chunk, void* d_x_chunk, const Tensor& d_embedding, float beta,
                   Workspace& workspace, const Stream& stream, const char* op) {
  const DType dtype = chunk.x.dtype;
  const std::int64_t pitch =
      static_cast<std::int64_t>(dtype_size(chunk.logits_dtype) / dtype_size(dtype)) * chunk.vocab;
  const MatrixOperand gradient{chunk.logits, dtype, pitch};

  MatmulProblem input_grad;  // d_x[rows, C] = g[rows, vocab] embedding[vocab, C]
  input_grad.m = chunk.rows;
  input_grad.n = chunk.channels;
  input_grad.k = chunk.vocab;
  input_grad.a = gradient;
  input_grad.b = chunk.embedding;
  input_grad.c = d_x_chunk;
  input_grad.c_dtype = dtype;
  input_grad.c_row_stride = chunk.channels;
  matmul(input_grad, workspace, stream);

  MatmulProblem embedding_grad;  // d_embedding[vocab, C] (+)= g^T[vocab, rows] x_chunk[rows, C]
  embedding_grad.transpose_a = Transpose::yes;
  embedding_grad.m = chunk.vocab;
  embedding_grad.n = chunk.channels;
  embedding_grad.k = chunk.rows;
  embedding_grad.beta = beta;
  embedding_grad.a = gradient;
  embedding_grad.b = chunk.x;
  embedding_grad.c = d_embedding.data;
  embedding_grad.c_dtype = d_embedding.dtype;
  embedding_grad.c_row_stride = chunk.channels;
  matmul(embedding_grad, workspace, stream);
}

// How the row kernel writes g for GEMMs that read activations of `dtype`.
launchers::CrossEntropyGradient gradient_mode(DType dtype) {
  return dtype == DType::bf16 ? launchers::CrossEntropyGradient::bf16_in_row
                              : launchers::CrossEntropyGradient::f32_in_place;
}

ClassifierChunk chunk_of(const Tensor& x, const Tensor& embedding, const Tensor& logits_scratch, std::int64_t r0,
                         std::int64_t rows, std::int64_t channels, std::int64_t vocab) {
  const std::size_t element = dtype_size(x.dtype);
  return {{static_cast<const char*>(x.data) + r0 * channels * element, x.dtype, channels},
          {embedding.data, x.dtype, channels},
          rows,
          channels,
          vocab,
          logits_scratch.data,
          logits_scratch.dtype};
}

}  // namespace

void softmax_cross_entropy(Tensor logits, const Tensor& targets, Tensor losses, std::int64_t rows, std::int64_t vocab,
                           bool with_grad, double grad_scale, const Stream& stream) {
  const char* op = "softmax_cross_entropy";
  const auto gradient = !with_grad                   ? launchers::CrossEntropyGradient::none
                        : logits.dtype == DType::f32 ? launchers::CrossEntropyGradient::f32_in_place
                                                     : launchers::CrossEntropyGradient::bf16_in_row;
  launch_cross_entropy(op, logits.data, logits.dtype, static_cast<const std::int32_t*>(targets.data),
                       static_cast<float*>(losses.data), rows, vocab, gradient, grad_scale, stream);
}

void fused_classifier(const Tensor& x, const Tensor& embedding, const Tensor& targets, Tensor losses,
                      Tensor logits_scratch, double grad_scale, Tensor d_x, Tensor d_embedding,
                      bool accumulate_d_embedding, const ClassifierShape& shape, Workspace& workspace,
                      const Stream& stream) {
  const char* op = "fused_classifier";
  const std::int64_t rows = shape.rows, channels = shape.channels, vocab = shape.vocab;
  const DType dtype = x.dtype;
  const bool with_grad = d_x.data != nullptr;
  const std::int64_t chunk_rows = static_cast<std::int64_t>(logits_scratch.numel()) / vocab;
  const auto mode = with_grad ? gradient_mode(dtype) : launchers::CrossEntropyGradient::none;
  const std::size_t element = dtype_size(dtype);

  for (std::int64_t r0 = 0; r0 < rows; r0 += chunk_rows) {
    const ClassifierChunk chunk =
        chunk_of(x, embedding, logits_scratch, r0, std::min(chunk_rows, rows - r0), channels, vocab);
    compute_logits(chunk, workspace, stream, op);
    launch_cross_entropy(op, chunk.logits, chunk.logits_dtype, static_cast<const std::int32_t*>(targets.data) + r0,
                         static_cast<float*>(losses.data) + r0, chunk.rows, vocab, mode, grad_scale, stream);
    if (!with_grad) continue;
    const float beta = (r0 == 0 && !accumulate_d_embedding) ? 0.0f : 1.0f;
    backpropagate(chunk, static_cast<char*>(d_x.data) + r0 * channels * element, d_embedding, beta, workspace, stream,
                  op);
  }
}

void vocab_parallel_classifier_stats(const Tensor& x, const Tensor& embedding, const Tensor& targets, Tensor stats,
                                     Tensor logits_scratch, const VocabParallelShape& shape, Workspace& workspace,
                                     const Stream& stream) {
  const char* op = "vocab_parallel_classifier_stats";
  const std::int64_t chunk_rows = static_cast<std::int64_t>(logits_scratch.numel()) / shape.vocab;
  auto* slice_lse = static_cast<float*>(stats.data);
  float* target_logit = slice_lse + shape.rows;
  for (std::int64_t r0 = 0; r0 < shape.rows; r0 += chunk_rows) {
    const ClassifierChunk chunk =
        chunk_of(x, embedding, logits_scratch, r0, std::min(chunk_rows, shape.rows - r0), shape.channels, shape.vocab);
    compute_logits(chunk, workspace, stream, op);
    check_launch(op, "slice statistics",
                 launchers::vocab_slice_statistics(chunk.logits, chunk.logits_dtype,
                                                   static_cast<const std::int32_t*>(targets.data) + r0,
                                                   shape.vocab_start, slice_lse + r0, target_logit + r0, chunk.rows,
                                                   shape.vocab, stream_handle(stream)));
  }
}

void vocab_parallel_combine(const Tensor& gathered, int tp_size, std::int64_t rows, Tensor losses, Tensor lse,
                            const Stream& stream) {
  const char* op = "vocab_parallel_combine";
  check_launch(op, "combine",
               launchers::vocab_parallel_combine(static_cast<const float*>(gathered.data), tp_size, rows,
                                                 static_cast<float*>(losses.data), static_cast<float*>(lse.data),
                                                 stream_handle(stream)));
}

void vocab_parallel_classifier_backward(const Tensor& x, const Tensor& embedding, const Tensor& targets,
                                        const Tensor& lse, double grad_scale, Tensor logits_scratch, Tensor d_x,
                                        Tensor d_embedding, bool accumulate_d_embedding,
                                        const VocabParallelShape& shape, Workspace& workspace, const Stream& stream) {
  const char* op = "vocab_parallel_classifier_backward";
  if (shape.rows == 0 && !accumulate_d_embedding) {  // no chunk overwrites it
    check_launch(op, "zero fill", cudaMemsetAsync(d_embedding.data, 0, d_embedding.bytes(), stream_handle(stream)));
    return;
  }
  const std::int64_t chunk_rows = static_cast<std::int64_t>(logits_scratch.numel()) / shape.vocab;
  const std::size_t element = dtype_size(x.dtype);
  for (std::int64_t r0 = 0; r0 < shape.rows; r0 += chunk_rows) {
    const ClassifierChunk chunk =
        chunk_of(x, embedding, logits_scratch, r0, std::min(chunk_rows, shape.rows - r0), shape.channels, shape.vocab);
    compute_logits(chunk, workspace, stream, op);
    check_launch(op, "slice gradient",
                 launchers::vocab_slice_gradient(
                     chunk.logits, chunk.logits_dtype, static_cast<const std::int32_t*>(targets.data) + r0,
                     shape.vocab_start, static_cast<const float*>(lse.data) + r0, chunk.rows, shape.vocab,
                     gradient_mode(x.dtype), static_cast<float>(grad_scale), stream_handle(stream)));
    const float beta = (r0 == 0 && !accumulate_d_embedding) ? 0.0f : 1.0f;
    backpropagate(chunk, static_cast<char*>(d_x.data) + r0 * shape.channels * element, d_embedding, beta, workspace,
                  stream, op);
  }
}

}  // namespace adamant::kernels::cuda
