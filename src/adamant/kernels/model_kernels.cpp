// Dispatch of the model kernels by the device of the data, after checking dtypes,
// devices and sizes once here. CUDA model kernels do not exist yet: CUDA operands
// get a clear error (in every build) instead of a call to a missing symbol.
#include "adamant/core/error.h"
#include "adamant/kernels/cpu/model_kernels_cpu.h"

namespace adamant::kernels {

namespace {

struct Operands {
  const char* op;
  DType dtype;
  Device device;

  Operands(const char* op_name, const Tensor& reference)
      : op(op_name), dtype(reference.dtype), device(reference.device) {
    ADAMANT_CHECK(dtype == DType::f32 || dtype == DType::f64,
                  "{}: operands of {}; the CPU model kernels take fp32 or fp64", op, dtype_name(dtype));
  }

  void check_common(const char* name, const Tensor& t, DType expected) const {
    ADAMANT_CHECK(t.data != nullptr, "{}: operand {} is empty", op, name);
    ADAMANT_CHECK(t.dtype == expected, "{}: operand {} is {}, expected {}", op, name, dtype_name(t.dtype),
                  dtype_name(expected));
    ADAMANT_CHECK(t.device == device, "{}: operand {} is on {}, the others on {}", op, name, t.device.str(),
                  device.str());
  }
  // Exactly `numel` elements of the common float dtype.
  void exact(const char* name, const Tensor& t, std::int64_t numel, DType expected) const {
    check_common(name, t, expected);
    ADAMANT_CHECK(static_cast<std::int64_t>(t.numel()) == numel, "{}: operand {} has {} elements, expected {}", op,
                  name, t.numel(), numel);
  }
  void exact(const char* name, const Tensor& t, std::int64_t numel) const { exact(name, t, numel, dtype); }
  void at_least(const char* name, const Tensor& t, std::int64_t numel) const {
    check_common(name, t, dtype);
    ADAMANT_CHECK(static_cast<std::int64_t>(t.numel()) >= numel, "{}: operand {} has {} elements, needs at least {}",
                  op, name, t.numel(), numel);
  }

  template <typename CpuCall>
  void run(CpuCall&& cpu_call) const {
    ADAMANT_CHECK(device.is_cpu(), "{}: not implemented on CUDA yet (operands on {}); run the model on the CPU", op,
                  device.str());
    cpu_call();
  }
};

void check_positive(const char* op, const char* what, std::int64_t value) {
  ADAMANT_CHECK(value > 0, "{}: {} is {}, must be positive", op, what, value);
}

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
  const Operands ops("gemm", c);
  ADAMANT_CHECK(m >= 0 && n >= 0 && k >= 0, "gemm: negative size {}x{}x{}", m, n, k);
  ops.exact("a", a, m * k);
  ops.exact("b", b, k * n);
  ops.exact("c", c, m * n);
  ops.run([&] { cpu::gemm(transpose_a, transpose_b, m, n, k, alpha, a, b, beta, c); });
}

void linear_forward(const Tensor& in, const Tensor& weight, const Tensor& bias, Tensor out, const LinearShape& shape,
                    const Stream& stream) {
  const Operands ops("linear_forward", out);
  check_positive(ops.op, "in_features", shape.in_features);
  check_positive(ops.op, "out_features", shape.out_features);
  ops.exact("in", in, shape.rows * shape.in_features);
  ops.exact("weight", weight, shape.out_features * shape.in_features);
  ops.exact("bias", bias, shape.out_features);
  ops.exact("out", out, shape.rows * shape.out_features);
  ops.run([&] { cpu::linear_forward(in, weight, bias, out, shape); });
}

void linear_backward(const Tensor& d_out, const Tensor& in, const Tensor& weight, Tensor d_in, Tensor d_weight,
                     Tensor d_bias, const LinearShape& shape, const Stream& stream) {
  const Operands ops("linear_backward", d_out);
  check_positive(ops.op, "in_features", shape.in_features);
  check_positive(ops.op, "out_features", shape.out_features);
  ops.exact("d_out", d_out, shape.rows * shape.out_features);
  ops.exact("in", in, shape.rows * shape.in_features);
  ops.exact("weight", weight, shape.out_features * shape.in_features);
  if (d_in.data != nullptr) ops.exact("d_in", d_in, shape.rows * shape.in_features);
  ops.exact("d_weight", d_weight, shape.out_features * shape.in_features);
  ops.exact("d_bias", d_bias, shape.out_features);
  ops.run([&] { cpu::linear_backward(d_out, in, weight, d_in, d_weight, d_bias, shape); });
}

void layernorm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, double epsilon, Tensor out,
                       Tensor mean, Tensor rstd, const RowsShape& shape, const Stream& stream) {
  const Operands ops("layernorm_forward", x);
  check_positive(ops.op, "cols", shape.cols);
  ADAMANT_CHECK(epsilon > 0.0, "layernorm_forward: epsilon {} must be positive", epsilon);
  ops.exact("x", x, shape.rows * shape.cols);
  ops.exact("weight", weight, shape.cols);
  ops.exact("bias", bias, shape.cols);
  ops.exact("out", out, shape.rows * shape.cols);
  ops.exact("mean", mean, shape.rows);
  ops.exact("rstd", rstd, shape.rows);
  ops.run([&] { cpu::layernorm_forward(x, weight, bias, epsilon, out, mean, rstd, shape); });
}

void layernorm_backward(const Tensor& d_out, const Tensor& x, const Tensor& weight, const Tensor& mean,
                        const Tensor& rstd, Tensor d_x, Tensor d_weight, Tensor d_bias, const RowsShape& shape,
                        const Stream& stream) {
  const Operands ops("layernorm_backward", x);
  check_positive(ops.op, "cols", shape.cols);
  ops.exact("d_out", d_out, shape.rows * shape.cols);
  ops.exact("x", x, shape.rows * shape.cols);
  ops.exact("weight", weight, shape.cols);
  ops.exact("mean", mean, shape.rows);
  ops.exact("rstd", rstd, shape.rows);
  ops.exact("d_x", d_x, shape.rows * shape.cols);
  ops.exact("d_weight", d_weight, shape.cols);
  ops.exact("d_bias", d_bias, shape.cols);
  ops.run([&] { cpu::layernorm_backward(d_out, x, weight, mean, rstd, d_x, d_weight, d_bias, shape); });
}

void attention_forward(const Tensor& qkv, Tensor probs, Tensor out, const AttentionShape& shape,
                       const DropoutArgs& dropout_args, const Stream& stream) {
  const Operands ops("attention_forward", qkv);
  check_positive(ops.op, "heads", shape.heads);
  check_positive(ops.op, "head_dim", shape.head_dim);
  check_dropout(ops.op, dropout_args, shape.batch);
  const std::int64_t tokens = shape.batch * shape.seq, channels = shape.heads * shape.head_dim;
  ops.exact("qkv", qkv, tokens * 3 * channels);
  ops.exact("probs", probs, shape.batch * shape.heads * shape.seq * shape.seq);
  ops.exact("out", out, tokens * channels);
  ops.run([&] { cpu::attention_forward(qkv, probs, out, shape, dropout_args); });
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
  ops.exact("d_out", d_out, tokens * channels);
  ops.exact("qkv", qkv, tokens * 3 * channels);
  ops.exact("probs", probs, probs_numel);
  ops.at_least("d_probs_scratch", d_probs_scratch, probs_numel);
  ops.exact("d_qkv", d_qkv, tokens * 3 * channels);
  ops.run([&] { cpu::attention_backward(d_out, qkv, probs, d_probs_scratch, d_qkv, shape, dropout_args); });
}

void gelu_forward(const Tensor& x, Tensor out, std::int64_t n, const Stream& stream) {
  const Operands ops("gelu_forward", x);
  ops.exact("x", x, n);
  ops.exact("out", out, n);
  ops.run([&] { cpu::gelu_forward(x, out, n); });
}

void gelu_backward(const Tensor& d_out, const Tensor& x, Tensor d_x, std::int64_t n, const Stream& stream) {
  const Operands ops("gelu_backward", x);
  ops.exact("d_out", d_out, n);
  ops.exact("x", x, n);
  ops.exact("d_x", d_x, n);
  ops.run([&] { cpu::gelu_backward(d_out, x, d_x, n); });
}

void dropout(const Tensor& in, Tensor out, std::int64_t batch, std::int64_t sample_numel, const DropoutArgs& args,
             const Stream& stream) {
  const Operands ops("dropout", in);
  check_dropout(ops.op, args, batch);
  ops.exact("in", in, batch * sample_numel);
  ops.exact("out", out, batch * sample_numel);
  ops.run([&] { cpu::dropout(in, out, batch, sample_numel, args); });
}

void residual_add(const Tensor& a, const Tensor& b, Tensor out, std::int64_t n, const Stream& stream) {
  const Operands ops("residual_add", a);
  ops.exact("a", a, n);
  ops.exact("b", b, n);
  ops.exact("out", out, n);
  ops.run([&] { cpu::residual_add(a, b, out, n); });
}

namespace {

void check_tokens(const Operands& ops, const Tensor& tokens, const EmbeddingShape& shape) {
  ops.exact("tokens", tokens, shape.batch * shape.seq, DType::i32);
  if (!tokens.device.is_cpu()) return;  // checked where the ids are read
  for (const std::int32_t id : tokens.span<std::int32_t>()) {
    ADAMANT_CHECK(id >= 0 && id < shape.vocab, "{}: token id {} outside the vocabulary [0, {})", ops.op, id,
                  shape.vocab);
  }
}

}  // namespace

void embedding_forward(const Tensor& tokens, const Tensor& word, const Tensor& position, Tensor out,
                       const EmbeddingShape& shape, const Stream& stream) {
  const Operands ops("embedding_forward", word);
  check_positive(ops.op, "channels", shape.channels);
  check_tokens(ops, tokens, shape);
  ops.exact("word", word, shape.vocab * shape.channels);
  ops.at_least("position", position, shape.seq * shape.channels);
  ops.exact("out", out, shape.batch * shape.seq * shape.channels);
  ops.run([&] { cpu::embedding_forward(tokens, word, position, out, shape); });
}

void embedding_backward(const Tensor& d_out, const Tensor& tokens, Tensor d_word, Tensor d_position,
                        const EmbeddingShape& shape, const Stream& stream) {
  const Operands ops("embedding_backward", d_out);
  check_positive(ops.op, "channels", shape.channels);
  check_tokens(ops, tokens, shape);
  ops.exact("d_out", d_out, shape.batch * shape.seq * shape.channels);
  ops.exact("d_word", d_word, shape.vocab * shape.channels);
  ops.at_least("d_position", d_position, shape.seq * shape.channels);
  ops.run([&] { cpu::embedding_backward(d_out, tokens, d_word, d_position, shape); });
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
  ops.exact("logits", logits, rows * vocab);
  check_targets(ops, targets, rows, vocab);
  ops.exact("losses", losses, rows);
  ops.run([&] { cpu::softmax_cross_entropy(logits, targets, losses, rows, vocab, with_grad, grad_scale); });
}

void fused_classifier(const Tensor& x, const Tensor& embedding, const Tensor& targets, Tensor losses,
                      Tensor logits_scratch, double grad_scale, Tensor d_x, Tensor d_embedding,
                      bool accumulate_d_embedding, const ClassifierShape& shape, const Stream& stream) {
  const Operands ops("fused_classifier", x);
  check_positive(ops.op, "channels", shape.channels);
  check_positive(ops.op, "vocab", shape.vocab);
  ops.exact("x", x, shape.rows * shape.channels);
  ops.exact("embedding", embedding, shape.vocab * shape.channels);
  check_targets(ops, targets, shape.rows, shape.vocab);
  ops.exact("losses", losses, shape.rows);
  ops.at_least("logits_scratch", logits_scratch, shape.vocab);  // at least one row per chunk
  if (d_x.data != nullptr) {
    ops.exact("d_x", d_x, shape.rows * shape.channels);
    ops.exact("d_embedding", d_embedding, shape.vocab * shape.channels);
  }
  ops.run([&] {
    cpu::fused_classifier(x, embedding, targets, losses, logits_scratch, grad_scale, d_x, d_embedding,
                          accumulate_d_embedding, shape);
  });
}

}  // namespace adamant::kernels
