// The CUDA softmax cross-entropy and the fused (tied) classifier of
// model_kernels_cuda.h.
//
// fused_classifier walks the rows in chunks of logits_scratch.numel() / vocab:
//   logits (fp32, the scratch) = x_chunk embedding^T          cuBLASLt, bf16 in
//   losses, and g = grad_scale * (softmax - onehot)           one block per row
//   d_x_chunk = g embedding,  d_embedding (+)= g^T x_chunk     cuBLASLt, bf16 in
// With bf16 activations the cross-entropy kernel writes g rounded to bf16 over the
// front half of each scratch row (row stride 2 * vocab), so both gradient GEMMs
// take bf16 operands without a second buffer; in fp32 mode g stays fp32 in place.
// Every step is enqueued on the caller's stream: nothing waits on the host.
#include <algorithm>
#include <cstdint>

#include "adamant/core/error.h"
#include "adamant/kernels/cuda/classifier_launchers.h"
#include "adamant/kernels/cuda/cublaslt_matmul.h"
#include "adamant/kernels/cuda/model_kernels_cuda.h"

namespace adamant::kernels::cuda {

namespace {

void check_tensor(const char* op, const char* name, const Tensor& t, DType expected, std::int64_t numel,
                  Device device) {
  ADAMANT_CHECK(t.data != nullptr, "{}: operand {} is empty", op, name);
  ADAMANT_CHECK(t.dtype == expected, "{}: operand {} is {}, expected {}", op, name, dtype_name(t.dtype),
                dtype_name(expected));
  ADAMANT_CHECK(t.device == device, "{}: operand {} is on {}, the others on {}", op, name, t.device.str(),
                device.str());
  ADAMANT_CHECK(static_cast<std::int64_t>(t.numel()) >= numel, "{}: operand {} has {} elements, needs {}", op, name,
                t.numel(), numel);
}

void launch_cross_entropy(const char* op, float* logits, const std::int32_t* targets, float* losses, std::int64_t rows,
                          std::int64_t vocab, launchers::CrossEntropyGradient gradient, double grad_scale,
                          const Stream& stream) {
  const cudaError_t status = launchers::softmax_cross_entropy(logits, targets, losses, rows, vocab, gradient,
                                                              static_cast<float>(grad_scale), stream_handle(stream));
  ADAMANT_CHECK(status == cudaSuccess, "{}: the cross-entropy kernel failed to launch for {} rows of {}: {} ({})", op,
                rows, vocab, cudaGetErrorString(status), static_cast<int>(status));
}

void run_matmul(const MatmulProblem& problem, Device device, const Stream& stream, const char* what) {
  const bool complete = matmul(problem, device, stream);
  ADAMANT_CHECK(complete, "fused_classifier: {} was not computed", what);
}

}  // namespace

void softmax_cross_entropy(Tensor logits, const Tensor& targets, Tensor losses, std::int64_t rows, std::int64_t vocab,
                           bool with_grad, double grad_scale, const Stream& stream) {
  const char* op = "softmax_cross_entropy";
  ADAMANT_CHECK(rows >= 0 && vocab > 0, "{}: {} rows of vocabulary {}", op, rows, vocab);
  check_tensor(op, "logits", logits, DType::f32, rows * vocab, logits.device);
  check_tensor(op, "targets", targets, DType::i32, rows, logits.device);
  check_tensor(op, "losses", losses, DType::f32, rows, logits.device);
  const ScopedCurrentDevice current(logits.device);
  launch_cross_entropy(
      op, static_cast<float*>(logits.data), static_cast<const std::int32_t*>(targets.data),
      static_cast<float*>(losses.data), rows, vocab,
      with_grad ? launchers::CrossEntropyGradient::f32_in_place : launchers::CrossEntropyGradient::none, grad_scale,
      stream);
}

void fused_classifier(const Tensor& x, const Tensor& embedding, const Tensor& targets, Tensor losses,
                      Tensor logits_scratch, double grad_scale, Tensor d_x, Tensor d_embedding,
                      bool accumulate_d_embedding, const ClassifierShape& shape, const Stream& stream) {
  const char* op = "fused_classifier";
  const std::int64_t rows = shape.rows, channels = shape.channels, vocab = shape.vocab;
  const DType dtype = x.dtype;
  const Device device = x.device;
  ADAMANT_CHECK(rows >= 0 && channels > 0 && vocab > 0, "{}: shape {} rows x {} channels, vocabulary {}", op, rows,
                channels, vocab);
  ADAMANT_CHECK(dtype == DType::bf16 || dtype == DType::f32,
                "{}: activations of {}; the GPU kernels take bf16 (or fp32 throughout)", op, dtype_name(dtype));
  check_tensor(op, "x", x, dtype, rows * channels, device);
  check_tensor(op, "embedding", embedding, dtype, vocab * channels, device);
  check_tensor(op, "targets", targets, DType::i32, rows, device);
  check_tensor(op, "losses", losses, DType::f32, rows, device);
  check_tensor(op, "logits_scratch", logits_scratch, DType::f32, vocab, device);
  const bool with_grad = d_x.data != nullptr;
  if (with_grad) {
    check_tensor(op, "d_x", d_x, dtype, rows * channels, device);
    check_tensor(op, "d_embedding", d_embedding, DType::f32, vocab * channels, device);
  }
  const ScopedCurrentDevice current(device);
  const std::int64_t chunk_rows = static_cast<std::int64_t>(logits_scratch.numel()) / vocab;
  auto* logits = static_cast<float*>(logits_scratch.data);
  const auto gradient_mode = !with_grad ? launchers::CrossEntropyGradient::none
                                        : (dtype == DType::bf16 ? launchers::CrossEntropyGradient::bf16_in_row
                                                                : launchers::CrossEntropyGradient::f32_in_place);
  // g: [n, vocab] in the scratch; bf16 rows keep the fp32 row pitch (2 * vocab bf16 elements).
  const MatrixOperand gradient{logits, dtype, dtype == DType::bf16 ? 2 * vocab : vocab};
  const std::size_t element = dtype_size(dtype);

  for (std::int64_t r0 = 0; r0 < rows; r0 += chunk_rows) {
    const std::int64_t n = std::min(chunk_rows, rows - r0);
    const MatrixOperand x_chunk{static_cast<const char*>(x.data) + r0 * channels * element, dtype, channels};
    const MatrixOperand embedding_matrix{embedding.data, dtype, channels};

    MatmulProblem logits_product;  // logits[n, vocab] = x_chunk[n, C] embedding[vocab, C]^T
    logits_product.transpose_b = Transpose::yes;
    logits_product.m = n;
    logits_product.n = vocab;
    logits_product.k = channels;
    logits_product.a = x_chunk;
    logits_product.b = embedding_matrix;
    logits_product.c = logits;
    logits_product.c_dtype = DType::f32;
    logits_product.c_row_stride = vocab;
    run_matmul(logits_product, device, stream, "the logits");

    launch_cross_entropy(op, logits, static_cast<const std::int32_t*>(targets.data) + r0,
                         static_cast<float*>(losses.data) + r0, n, vocab, gradient_mode, grad_scale, stream);
    if (!with_grad) continue;

    MatmulProblem input_grad;  // d_x[n, C] = g[n, vocab] embedding[vocab, C]
    input_grad.m = n;
    input_grad.n = channels;
    input_grad.k = vocab;
    input_grad.a = gradient;
    input_grad.b = embedding_matrix;
    input_grad.c = static_cast<char*>(d_x.data) + r0 * channels * element;
    input_grad.c_dtype = dtype;
    input_grad.c_row_stride = channels;
    run_matmul(input_grad, device, stream, "d_x");

    MatmulProblem embedding_grad;  // d_embedding[vocab, C] (+)= g^T[vocab, n] x_chunk[n, C]
    embedding_grad.transpose_a = Transpose::yes;
    embedding_grad.m = vocab;
    embedding_grad.n = channels;
    embedding_grad.k = n;
    embedding_grad.beta = (r0 == 0 && !accumulate_d_embedding) ? 0.0f : 1.0f;
    embedding_grad.a = gradient;
    embedding_grad.b = x_chunk;
    embedding_grad.c = d_embedding.data;
    embedding_grad.c_dtype = DType::f32;
    embedding_grad.c_row_stride = channels;
    run_matmul(embedding_grad, device, stream, "d_embedding");
  }
}

}  // namespace adamant::kernels::cuda
