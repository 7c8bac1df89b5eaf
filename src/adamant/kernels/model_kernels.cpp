// Dispatch of the model kernels by the device of the data, after checking dtypes,
// devices and sizes once here. On the CPU every operand has one dtype (fp32 or
// fp64); CUDA operands follow the GPU dtype convention of
// kernels/cuda/model_kernels_cuda.h (bf16 activations and weights, fp32 weight
// gradients and statistics). A build without CUDA gives CUDA operands a clear error.
#include <cstdint>
#include <type_traits>

#include "adamant/core/error.h"
#include "adamant/kernels/cpu/model_kernels_cpu.h"
#ifdef ADAMANT_HAVE_CUDA
#include "adamant/kernels/cuda/model_kernels_cuda.h"
// The CUDA call of an operation, only compiled where its symbols exist.
#define ADAMANT_CUDA_CALL(...) [&] { __VA_ARGS__; }
#else
#define ADAMANT_CUDA_CALL(...) nullptr
#endif

namespace adamant::kernels {

namespace {

// What an operand is, which fixes its dtype on a GPU.
enum class Role {
  activation,   // activations and their gradients: bf16 on a GPU
  weight,       // model weights: bf16 on a GPU
  weight_grad,  // gradients of weights: fp32 on a GPU
  statistic,    // layernorm mean/rstd, losses, logits: fp32 on a GPU
};

struct Operands {
  const char* op;
  DType dtype;  // the common dtype on the CPU
  Device device;

  Operands(const char* op_name, const Tensor& reference)
      : op(op_name), dtype(reference.dtype), device(reference.device) {
    ADAMANT_CHECK(!device.is_cpu() || dtype == DType::f32 || dtype == DType::f64,
                  "{}: operands of {}; the CPU model kernels take fp32 or fp64", op, dtype_name(dtype));
  }

  DType expected(Role role) const {
    if (device.is_cpu()) return dtype;
    return role == Role::activation || role == Role::weight ? DType::bf16 : DType::f32;
  }

  void check_common(const char* name, const Tensor& t, DType expected_dtype) const {
    ADAMANT_CHECK(t.data != nullptr, "{}: operand {} is empty", op, name);
    ADAMANT_CHECK(t.device == device, "{}: operand {} is on {}, the others on {}", op, name, t.device.str(),
                  device.str());
    ADAMANT_CHECK(t.dtype == expected_dtype, "{}: operand {} is {}, expected {}{}", op, name, dtype_name(t.dtype),
                  dtype_name(expected_dtype),
                  device.is_cpu() ? "" : " (the GPU dtype convention of kernels/cuda/model_kernels_cuda.h)");
  }
  // Exactly `numel` elements of the given dtype.
  void exact(const char* name, const Tensor& t, std::int64_t numel, DType expected_dtype) const {
    check_common(name, t, expected_dtype);
    ADAMANT_CHECK(static_cast<std::int64_t>(t.numel()) == numel, "{}: operand {} has {} elements, expected {}", op,
                  name, t.numel(), numel);
  }
  void exact(const char* name, const Tensor& t, std::int64_t numel, Role role) const {
    exact(name, t, numel, expected(role));
  }
  void at_least(const char* name, const Tensor& t, std::int64_t numel, Role role) const {
    check_common(name, t, expected(role));
    ADAMANT_CHECK(static_cast<std::int64_t>(t.numel()) >= numel, "{}: operand {} has {} elements, needs at least {}",
                  op, name, t.numel(), numel);
  }

  // cuda_call is nullptr in a build without CUDA.
  template <typename CpuCall, typename CudaCall>
  void run(const Stream& stream, CpuCall&& cpu_call, CudaCall&& cuda_call) const {
    if (device.is_cpu()) {
      cpu_call();
      return;
    }
    if constexpr (std::is_null_pointer_v<std::decay_t<CudaCall>>) {
      fail(
          "{}: operands on {}, but this build has no CUDA support; reconfigure with -DADAMANT_CUDA=ON or run on the "
          "CPU",
          op, device.str());
    } else {
      // A CPU stream means the device's default stream; a CUDA stream must be on the operands' GPU.
      ADAMANT_CHECK(stream.device().is_cpu() || stream.device() == device,
                    "{}: operands on {} but the stream is on {}; use a stream of the operands' device", op,
                    device.str(), stream.device().str());
      cuda_call();
    }
  }
};

void check_positive(const char* op, const char* what, std::int64_t value) {
  ADAMANT_CHECK(value > 0, "{}: {} is {}, must be positive", op, what, value);
}

// `batch`: how many samples from first_sample_index on the call touches.
void check_dropout(const char* op, const DropoutArgs& args, std::int64_t batch) {
  ADAMANT_CHECK(args.probability >= 0.0f && args.probability < 1.0f, "{}: dropout probability {} is outside [0, 1)", op,
                args.probability);
  ADAMANT_CHECK(args.site < (1u << kDropoutSiteBits), "{}: dropout site {} exceeds {} bits", op, args.site,
                kDropoutSiteBits);
  ADAMANT_CHECK(args.first_sample_index + static_cast<std::uint64_t>(batch) <= kMaxDropoutSample,
                "{}: sample index {} is beyond the dropout generator's range", op, args.first_sample_index);
}

}  // namespace

void gemm(Transpose transpose_a, Transpose transpose_b, std::int64_t m, std::int64_t n, std::int64_t k, double alpha,
          const Tensor& a, const Tensor& b, double beta, Tensor c, const Stream& stream) {
  const Operands ops("gemm", a);
  ADAMANT_CHECK(m >= 0 && n >= 0 && k >= 0, "gemm: negative size {}x{}x{}", m, n, k);
  DType input = ops.dtype, output = ops.dtype;  // the CPU: one dtype throughout
  if (ops.device.is_cuda()) {                   // a and b bf16 with c bf16 or fp32, or all three fp32
    input = a.dtype == DType::f32 ? DType::f32 : DType::bf16;
    output = input == DType::bf16 && c.dtype == DType::f32 ? DType::f32 : input;
  }
  ops.exact("a", a, m * k, input);
  ops.exact("b", b, k * n, input);
  ops.exact("c", c, m * n, output);
  ops.run(
      stream, [&] { cpu::gemm(transpose_a, transpose_b, m, n, k, alpha, a, b, beta, c); },
      ADAMANT_CUDA_CALL(cuda::gemm(transpose_a, transpose_b, m, n, k, alpha, a, b, beta, c, stream)));
}

void linear_forward(const Tensor& in, const Tensor& weight, const Tensor& bias, Tensor out, const LinearShape& shape,
                    const Stream& stream) {
  const Operands ops("linear_forward", out);
  check_positive(ops.op, "in_features", shape.in_features);
  check_positive(ops.op, "out_features", shape.out_features);
  ops.exact("in", in, shape.rows * shape.in_features, Role::activation);
  ops.exact("weight", weight, shape.out_features * shape.in_features, Role::weight);
  if (bias.data != nullptr) ops.exact("bias", bias, shape.out_features, Role::weight);
  ops.exact("out", out, shape.rows * shape.out_features, Role::activation);
  ops.run(
      stream, [&] { cpu::linear_forward(in, weight, bias, out, shape); },
      ADAMANT_CUDA_CALL(cuda::linear_forward(in, weight, bias, out, shape, stream)));
}

void linear_backward(const Tensor& d_out, const Tensor& in, const Tensor& weight, Tensor d_in, Tensor d_weight,
                     Tensor d_bias, const LinearShape& shape, const Stream& stream, WeightGrad weight_grad) {
  const Operands ops("linear_backward", d_out);
  check_positive(ops.op, "in_features", shape.in_features);
  check_positive(ops.op, "out_features", shape.out_features);
  ops.exact("d_out", d_out, shape.rows * shape.out_features, Role::activation);
  ops.exact("in", in, shape.rows * shape.in_features, Role::activation);
  ops.exact("weight", weight, shape.out_features * shape.in_features, Role::weight);
  if (d_in.data != nullptr) ops.exact("d_in", d_in, shape.rows * shape.in_features, Role::activation);
  ops.exact("d_weight", d_weight, shape.out_features * shape.in_features, Role::weight_grad);
  if (d_bias.data != nullptr) ops.exact("d_bias", d_bias, shape.out_features, Role::weight_grad);
  ops.run(
      stream, [&] { cpu::linear_backward(d_out, in, weight, d_in, d_weight, d_bias, shape, weight_grad); },
      ADAMANT_CUDA_CALL(cuda::linear_backward(d_out, in, weight, d_in, d_weight, d_bias, shape, stream, weight_grad)));
}

void layernorm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, double epsilon, Tensor out,
                       Tensor mean, Tensor rstd, const RowsShape& shape, const Stream& stream) {
  const Operands ops("layernorm_forward", x);
  check_positive(ops.op, "cols", shape.cols);
  ADAMANT_CHECK(epsilon > 0.0, "layernorm_forward: epsilon {} must be positive", epsilon);
  ops.exact("x", x, shape.rows * shape.cols, Role::activation);
  ops.exact("weight", weight, shape.cols, Role::weight);
  ops.exact("bias", bias, shape.cols, Role::weight);
  ops.exact("out", out, shape.rows * shape.cols, Role::activation);
  ops.exact("mean", mean, shape.rows, Role::statistic);
  ops.exact("rstd", rstd, shape.rows, Role::statistic);
  ops.run(
      stream, [&] { cpu::layernorm_forward(x, weight, bias, epsilon, out, mean, rstd, shape); },
      ADAMANT_CUDA_CALL(cuda::layernorm_forward(x, weight, bias, epsilon, out, mean, rstd, shape, stream)));
}

void layernorm_backward(const Tensor& d_out, const Tensor& x, const Tensor& weight, const Tensor& mean,
                        const Tensor& rstd, Tensor d_x, Tensor d_weight, Tensor d_bias, const RowsShape& shape,
                        const Stream& stream) {
  const Operands ops("layernorm_backward", x);
  check_positive(ops.op, "cols", shape.cols);
  ops.exact("d_out", d_out, shape.rows * shape.cols, Role::activation);
  ops.exact("x", x, shape.rows * shape.cols, Role::activation);
  ops.exact("weight", weight, shape.cols, Role::weight);
  ops.exact("mean", mean, shape.rows, Role::statistic);
  ops.exact("rstd", rstd, shape.rows, Role::statistic);
  ops.exact("d_x", d_x, shape.rows * shape.cols, Role::activation);
  ops.exact("d_weight", d_weight, shape.cols, Role::weight_grad);
  ops.exact("d_bias", d_bias, shape.cols, Role::weight_grad);
  ops.run(
      stream, [&] { cpu::layernorm_backward(d_out, x, weight, mean, rstd, d_x, d_weight, d_bias, shape); },
      ADAMANT_CUDA_CALL(cuda::layernorm_backward(d_out, x, weight, mean, rstd, d_x, d_weight, d_bias, shape, stream)));
}

void attention_forward(const Tensor& qkv, Tensor probs, Tensor out, const AttentionShape& shape,
                       const DropoutArgs& dropout_args, const Stream& stream) {
  const Operands ops("attention_forward", qkv);
  check_positive(ops.op, "heads", shape.heads);
  check_positive(ops.op, "head_dim", shape.head_dim);
  check_dropout(ops.op, dropout_args, shape.batch);
  const std::int64_t tokens = shape.batch * shape.seq, channels = shape.heads * shape.head_dim;
  ops.exact("qkv", qkv, tokens * 3 * channels, Role::activation);
  ops.exact("probs", probs, shape.batch * shape.heads * shape.seq * shape.seq, Role::activation);
  ops.exact("out", out, tokens * channels, Role::activation);
  ops.run(
      stream, [&] { cpu::attention_forward(qkv, probs, out, shape, dropout_args); },
      ADAMANT_CUDA_CALL(cuda::attention_forward(qkv, probs, out, shape, dropout_args, stream)));
}

void attention_backward(const Tensor& d_out, const Tensor& qkv, const Tensor& probs, Tensor d_probs_scratch,
                        Tensor d_qkv, const AttentionShape& shape, const DropoutArgs& dropout_args,
                        const Stream& stream) {
  const Operands ops("attention_backward", qkv);
  check_positive(ops.op, "heads", shape.heads);
  check_positive(ops.op, "head_dim", shape.head_dim);
  check_dropout(ops.op, dropout_args, shape.batch);
  const std::int64_t tokens = shape.batch * shape.seq, channels = shape.heads * shape.head_dim;
  const std::int64_t probs_numel = shape.batch * shape.heads * shape.seq * shape.seq;
  ops.exact("d_out", d_out, tokens * channels, Role::activation);
  ops.exact("qkv", qkv, tokens * 3 * channels, Role::activation);
  ops.exact("probs", probs, probs_numel, Role::activation);
  ops.at_least("d_probs_scratch", d_probs_scratch, probs_numel, Role::activation);
  ops.exact("d_qkv", d_qkv, tokens * 3 * channels, Role::activation);
  ops.run(
      stream, [&] { cpu::attention_backward(d_out, qkv, probs, d_probs_scratch, d_qkv, shape, dropout_args); },
      ADAMANT_CUDA_CALL(
          cuda::attention_backward(d_out, qkv, probs, d_probs_scratch, d_qkv, shape, dropout_args, stream)));
}

void gelu_forward(const Tensor& x, Tensor out, std::int64_t n, GeluForm form, const Stream& stream) {
  const Operands ops("gelu_forward", x);
  ops.exact("x", x, n, Role::activation);
  ops.exact("out", out, n, Role::activation);
  ops.run(
      stream, [&] { cpu::gelu_forward(x, out, n, form); },
      ADAMANT_CUDA_CALL(cuda::gelu_forward(x, out, n, form, stream)));
}

void gelu_backward(const Tensor& d_out, const Tensor& x, Tensor d_x, std::int64_t n, GeluForm form,
                   const Stream& stream) {
  const Operands ops("gelu_backward", x);
  ops.exact("d_out", d_out, n, Role::activation);
  ops.exact("x", x, n, Role::activation);
  ops.exact("d_x", d_x, n, Role::activation);
  ops.run(
      stream, [&] { cpu::gelu_backward(d_out, x, d_x, n, form); },
      ADAMANT_CUDA_CALL(cuda::gelu_backward(d_out, x, d_x, n, form, stream)));
}

void dropout(const Tensor& in, Tensor out, std::int64_t numel, std::int64_t sample_numel, const DropoutArgs& args,
             const Stream& stream) {
  const Operands ops("dropout", in);
  ADAMANT_CHECK(numel >= 0, "dropout: negative size {}", numel);
  check_positive(ops.op, "sample_numel", sample_numel);
  ADAMANT_CHECK(args.first_element % kDropoutGroup == 0,
                "dropout: first_element {} is not a multiple of {}: one Philox draw decides {} consecutive elements, "
                "so a shard must start at a multiple of {} elements of the flattened batch",
                args.first_element, kDropoutGroup, kDropoutGroup, kDropoutGroup);
  ADAMANT_CHECK(args.first_element <= static_cast<std::uint64_t>(INT64_MAX - numel),
                "dropout: first_element {} + {} elements overflows", args.first_element, numel);
  // The samples that [first_element, first_element + numel) touches, counted from first_sample_index.
  const auto end = static_cast<std::int64_t>(args.first_element) + numel;
  check_dropout(ops.op, args, (end + sample_numel - 1) / sample_numel);
  ops.exact("in", in, numel, Role::activation);
  ops.exact("out", out, numel, Role::activation);
  ops.run(
      stream, [&] { cpu::dropout(in, out, numel, sample_numel, args); },
      ADAMANT_CUDA_CALL(cuda::dropout(in, out, numel, sample_numel, args, stream)));
}

void residual_add(const Tensor& a, const Tensor& b, Tensor out, std::int64_t n, const Stream& stream) {
  const Operands ops("residual_add", a);
  ops.exact("a", a, n, Role::activation);
  ops.exact("b", b, n, Role::activation);
  ops.exact("out", out, n, Role::activation);
  ops.run(
      stream, [&] { cpu::residual_add(a, b, out, n); }, ADAMANT_CUDA_CALL(cuda::residual_add(a, b, out, n, stream)));
}

namespace {

void check_tokens(const Operands& ops, const Tensor& tokens, const EmbeddingShape& shape) {
  ADAMANT_CHECK(shape.vocab_start >= 0, "{}: vocab_start {} is negative", ops.op, shape.vocab_start);
  ops.exact("tokens", tokens, shape.batch * shape.seq, DType::i32);
  if (!tokens.device.is_cpu()) return;  // device ids: the model checked them on the host before the copy
  // An id outside [vocab_start, vocab_start + vocab) belongs to another rank's slice of the
  // table, so only a negative id is wrong here.
  for (const std::int32_t id : tokens.span<std::int32_t>()) {
    ADAMANT_CHECK(id >= 0, "{}: token id {} is negative", ops.op, id);
  }
}

}  // namespace

void embedding_forward(const Tensor& tokens, const Tensor& word, const Tensor& position, Tensor out,
                       const EmbeddingShape& shape, const Stream& stream) {
  const Operands ops("embedding_forward", word);
  check_positive(ops.op, "channels", shape.channels);
  check_tokens(ops, tokens, shape);
  ops.exact("word", word, shape.vocab * shape.channels, Role::weight);
  if (position.data != nullptr) ops.at_least("position", position, shape.seq * shape.channels, Role::weight);
  ops.exact("out", out, shape.batch * shape.seq * shape.channels, Role::activation);
  ops.run(
      stream, [&] { cpu::embedding_forward(tokens, word, position, out, shape); },
      ADAMANT_CUDA_CALL(cuda::embedding_forward(tokens, word, position, out, shape, stream)));
}

void embedding_backward(const Tensor& d_out, const Tensor& tokens, Tensor d_word, Tensor d_position,
                        const EmbeddingShape& shape, const Stream& stream) {
  const Operands ops("embedding_backward", d_out);
  check_positive(ops.op, "channels", shape.channels);
  check_tokens(ops, tokens, shape);
  ops.exact("d_out", d_out, shape.batch * shape.seq * shape.channels, Role::activation);
  ops.exact("d_word", d_word, shape.vocab * shape.channels, Role::weight_grad);
  if (d_position.data != nullptr) {
    ops.at_least("d_position", d_position, shape.seq * shape.channels, Role::weight_grad);
  }
  ops.run(
      stream, [&] { cpu::embedding_backward(d_out, tokens, d_word, d_position, shape); },
      ADAMANT_CUDA_CALL(cuda::embedding_backward(d_out, tokens, d_word, d_position, shape, stream)));
}

namespace {

void check_targets(const Operands& ops, const Tensor& targets, std::int64_t rows, std::int64_t vocab) {
  ops.exact("targets", targets, rows, DType::i32);
  if (!targets.device.is_cpu()) return;
  for (const std::int32_t id : targets.span<std::int32_t>()) {
    ADAMANT_CHECK(id >= 0 && id < vocab, "{}: target id {} outside the vocabulary [0, {})", ops.op, id, vocab);
  }
}

}  // namespace

void softmax_cross_entropy(Tensor logits, const Tensor& targets, Tensor losses, std::int64_t rows, std::int64_t vocab,
                           bool with_grad, double grad_scale, const Stream& stream) {
  const Operands ops("softmax_cross_entropy", logits);
  check_positive(ops.op, "vocab", vocab);
  ops.exact("logits", logits, rows * vocab, Role::statistic);  // fp32 logits on a GPU, as the classifier's scratch
  check_targets(ops, targets, rows, vocab);
  ops.exact("losses", losses, rows, Role::statistic);
  ops.run(
      stream, [&] { cpu::softmax_cross_entropy(logits, targets, losses, rows, vocab, with_grad, grad_scale); },
      ADAMANT_CUDA_CALL(
          cuda::softmax_cross_entropy(logits, targets, losses, rows, vocab, with_grad, grad_scale, stream)));
}

void fused_classifier(const Tensor& x, const Tensor& embedding, const Tensor& targets, Tensor losses,
                      Tensor logits_scratch, double grad_scale, Tensor d_x, Tensor d_embedding,
                      bool accumulate_d_embedding, const ClassifierShape& shape, const Stream& stream) {
  const Operands ops("fused_classifier", x);
  check_positive(ops.op, "channels", shape.channels);
  check_positive(ops.op, "vocab", shape.vocab);
  ops.exact("x", x, shape.rows * shape.channels, Role::activation);
  ops.exact("embedding", embedding, shape.vocab * shape.channels, Role::weight);
  check_targets(ops, targets, shape.rows, shape.vocab);
  ops.exact("losses", losses, shape.rows, Role::statistic);
  ops.at_least("logits_scratch", logits_scratch, shape.vocab, Role::statistic);  // at least one row per chunk
  if (d_x.data != nullptr) {
    ops.exact("d_x", d_x, shape.rows * shape.channels, Role::activation);
    ops.exact("d_embedding", d_embedding, shape.vocab * shape.channels, Role::weight_grad);
  }
  ops.run(
      stream,
      [&] {
        cpu::fused_classifier(x, embedding, targets, losses, logits_scratch, grad_scale, d_x, d_embedding,
                              accumulate_d_embedding, shape);
      },
      ADAMANT_CUDA_CALL(cuda::fused_classifier(x, embedding, targets, losses, logits_scratch, grad_scale, d_x,
                                               d_embedding, accumulate_d_embedding, shape, stream)));
}

namespace {

// Shapes and targets of the vocabulary-parallel classifier; targets index the whole
// vocabulary, so a target beyond this slice is another rank's, and only a negative one is wrong.
void check_vocab_parallel(const Operands& ops, const Tensor& x, const Tensor& embedding, const Tensor& targets,
                          const Tensor& logits_scratch, const VocabParallelShape& shape) {
  ADAMANT_CHECK(shape.rows >= 0, "{}: {} rows", ops.op, shape.rows);
  check_positive(ops.op, "channels", shape.channels);
  check_positive(ops.op, "vocab", shape.vocab);
  ADAMANT_CHECK(shape.vocab_start >= 0, "{}: vocab_start {} is negative", ops.op, shape.vocab_start);
  ops.exact("x", x, shape.rows * shape.channels, Role::activation);
  ops.exact("embedding", embedding, shape.vocab * shape.channels, Role::weight);
  ops.exact("targets", targets, shape.rows, DType::i32);
  ops.at_least("logits_scratch", logits_scratch, shape.vocab, Role::statistic);  // at least one row per chunk
  if (!targets.device.is_cpu()) return;
  for (const std::int32_t id : targets.span<std::int32_t>()) {
    ADAMANT_CHECK(id >= 0, "{}: target id {} is negative", ops.op, id);
  }
}

}  // namespace

void vocab_parallel_classifier_stats(const Tensor& x, const Tensor& embedding, const Tensor& targets, Tensor stats,
                                     Tensor logits_scratch, const VocabParallelShape& shape, const Stream& stream) {
  const Operands ops("vocab_parallel_classifier_stats", x);
  check_vocab_parallel(ops, x, embedding, targets, logits_scratch, shape);
  ops.exact("stats", stats, 2 * shape.rows, Role::statistic);
  ops.run(
      stream, [&] { cpu::vocab_parallel_classifier_stats(x, embedding, targets, stats, logits_scratch, shape); },
      ADAMANT_CUDA_CALL(
          cuda::vocab_parallel_classifier_stats(x, embedding, targets, stats, logits_scratch, shape, stream)));
}

void vocab_parallel_combine(const Tensor& gathered, int tp_size, std::int64_t rows, Tensor losses, Tensor lse,
                            const Stream& stream) {
  const Operands ops("vocab_parallel_combine", losses);
  check_positive(ops.op, "tp_size", tp_size);
  ADAMANT_CHECK(rows >= 0, "{}: {} rows", ops.op, rows);
  ops.exact("gathered", gathered, tp_size * 2 * rows, Role::statistic);
  ops.exact("losses", losses, rows, Role::statistic);
  ops.exact("lse", lse, rows, Role::statistic);
  ops.run(
      stream, [&] { cpu::vocab_parallel_combine(gathered, tp_size, rows, losses, lse); },
      ADAMANT_CUDA_CALL(cuda::vocab_parallel_combine(gathered, tp_size, rows, losses, lse, stream)));
}

void vocab_parallel_classifier_backward(const Tensor& x, const Tensor& embedding, const Tensor& targets,
                                        const Tensor& lse, double grad_scale, Tensor logits_scratch, Tensor d_x,
                                        Tensor d_embedding, bool accumulate_d_embedding,
                                        const VocabParallelShape& shape, const Stream& stream) {
  const Operands ops("vocab_parallel_classifier_backward", x);
  check_vocab_parallel(ops, x, embedding, targets, logits_scratch, shape);
  ops.exact("lse", lse, shape.rows, Role::statistic);
  ops.exact("d_x", d_x, shape.rows * shape.channels, Role::activation);
  ops.exact("d_embedding", d_embedding, shape.vocab * shape.channels, Role::weight_grad);
  ops.run(
      stream,
      [&] {
        cpu::vocab_parallel_classifier_backward(x, embedding, targets, lse, grad_scale, logits_scratch, d_x,
                                                d_embedding, accumulate_d_embedding, shape);
      },
      ADAMANT_CUDA_CALL(cuda::vocab_parallel_classifier_backward(x, embedding, targets, lse, grad_scale, logits_scratch,
                                                                 d_x, d_embedding, accumulate_d_embedding, shape,
                                                                 stream)));
}

}  // namespace adamant::kernels
