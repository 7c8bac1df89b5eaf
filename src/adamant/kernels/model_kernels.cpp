// The model kernels' dispatchers (kernels/dispatch.h): each checks its operands once
// and runs the CPU or the CUDA implementation by their device.
#include <climits>
#include <cstdint>

#include "adamant/kernels/cpu/model_kernels_cpu.h"
#include "adamant/kernels/dispatch.h"
#ifdef ADAMANT_HAVE_CUDA
#include "adamant/kernels/cuda/model_kernels_cuda.h"
#endif

namespace adamant::kernels {

namespace {

// `batch`: how many samples from first_sample_index on the call touches.
void check_dropout(const KernelCall& call, const DropoutArgs& args, std::int64_t batch) {
  const char* op = call.op();
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
  const KernelCall call = KernelCall::model("gemm", a, stream);
  ADAMANT_CHECK(m >= 0 && n >= 0 && k >= 0, "gemm: negative size {}x{}x{}", m, n, k);
  DType input = a.dtype, output = a.dtype;  // the CPU: one dtype throughout
  if (call.on_cuda()) {                     // a and b bf16 with c bf16 or fp32, or all three fp32
    input = a.dtype == DType::f32 ? DType::f32 : DType::bf16;
    output = input == DType::bf16 && c.dtype == DType::f32 ? DType::f32 : input;
  }
  call.exact("a", a, m * k, input);
  call.exact("b", b, k * n, input);
  call.exact("c", c, m * n, output);
  call.run([&] { cpu::gemm(transpose_a, transpose_b, m, n, k, alpha, a, b, beta, c); },
           ADAMANT_CUDA_CALL(cuda::gemm(transpose_a, transpose_b, m, n, k, alpha, a, b, beta, c, stream)));
}

void linear_forward(const Tensor& in, const Tensor& weight, const Tensor& bias, Tensor out, const LinearShape& shape,
                    const Stream& stream) {
  const KernelCall call = KernelCall::model("linear_forward", out, stream);
  call.positive("in_features", shape.in_features);
  call.positive("out_features", shape.out_features);
  call.exact("in", in, shape.rows * shape.in_features, Role::activation);
  call.exact("weight", weight, shape.out_features * shape.in_features, Role::weight);
  if (bias.data != nullptr) call.exact("bias", bias, shape.out_features, Role::weight);
  call.exact("out", out, shape.rows * shape.out_features, Role::activation);
  call.run([&] { cpu::linear_forward(in, weight, bias, out, shape); },
           ADAMANT_CUDA_CALL(cuda::linear_forward(in, weight, bias, out, shape, stream)));
}

void linear_backward(const Tensor& d_out, const Tensor& in, const Tensor& weight, Tensor d_in, Tensor d_weight,
                     Tensor d_bias, const LinearShape& shape, const Stream& stream, WeightGrad weight_grad) {
  const KernelCall call = KernelCall::model("linear_backward", d_out, stream);
  call.positive("in_features", shape.in_features);
  call.positive("out_features", shape.out_features);
  call.exact("d_out", d_out, shape.rows * shape.out_features, Role::activation);
  call.exact("in", in, shape.rows * shape.in_features, Role::activation);
  call.exact("weight", weight, shape.out_features * shape.in_features, Role::weight);
  if (d_in.data != nullptr) call.exact("d_in", d_in, shape.rows * shape.in_features, Role::activation);
  call.exact("d_weight", d_weight, shape.out_features * shape.in_features, Role::weight_grad);
  if (d_bias.data != nullptr) call.exact("d_bias", d_bias, shape.out_features, Role::weight_grad);
  call.run(
      [&] { cpu::linear_backward(d_out, in, weight, d_in, d_weight, d_bias, shape, weight_grad); },
      ADAMANT_CUDA_CALL(cuda::linear_backward(d_out, in, weight, d_in, d_weight, d_bias, shape, stream, weight_grad)));
}

void layernorm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, double epsilon, Tensor out,
                       Tensor mean, Tensor rstd, const RowsShape& shape, const Stream& stream) {
  const KernelCall call = KernelCall::model("layernorm_forward", x, stream);
  call.positive("cols", shape.cols);
  ADAMANT_CHECK(epsilon > 0.0, "layernorm_forward: epsilon {} must be positive", epsilon);
  call.exact("x", x, shape.rows * shape.cols, Role::activation);
  call.exact("weight", weight, shape.cols, Role::weight);
  call.exact("bias", bias, shape.cols, Role::weight);
  call.exact("out", out, shape.rows * shape.cols, Role::activation);
  call.exact("mean", mean, shape.rows, Role::statistic);
  call.exact("rstd", rstd, shape.rows, Role::statistic);
  call.run([&] { cpu::layernorm_forward(x, weight, bias, epsilon, out, mean, rstd, shape); },
           ADAMANT_CUDA_CALL(cuda::layernorm_forward(x, weight, bias, epsilon, out, mean, rstd, shape, stream)));
}

void layernorm_backward(const Tensor& d_out, const Tensor& x, const Tensor& weight, const Tensor& mean,
                        const Tensor& rstd, Tensor d_x, Tensor d_weight, Tensor d_bias, const RowsShape& shape,
                        const Stream& stream) {
  const KernelCall call = KernelCall::model("layernorm_backward", x, stream);
  call.positive("cols", shape.cols);
  call.exact("d_out", d_out, shape.rows * shape.cols, Role::activation);
  call.exact("x", x, shape.rows * shape.cols, Role::activation);
  call.exact("weight", weight, shape.cols, Role::weight);
  call.exact("mean", mean, shape.rows, Role::statistic);
  call.exact("rstd", rstd, shape.rows, Role::statistic);
  call.exact("d_x", d_x, shape.rows * shape.cols, Role::activation);
  call.exact("d_weight", d_weight, shape.cols, Role::weight_grad);
  call.exact("d_bias", d_bias, shape.cols, Role::weight_grad);
  call.run(
      [&] { cpu::layernorm_backward(d_out, x, weight, mean, rstd, d_x, d_weight, d_bias, shape); },
      ADAMANT_CUDA_CALL(cuda::layernorm_backward(d_out, x, weight, mean, rstd, d_x, d_weight, d_bias, shape, stream)));
}

void gelu_forward(const Tensor& x, Tensor out, std::int64_t n, GeluForm form, const Stream& stream) {
  const KernelCall call = KernelCall::model("gelu_forward", x, stream);
  call.exact("x", x, n, Role::activation);
  call.exact("out", out, n, Role::activation);
  call.run([&] { cpu::gelu_forward(x, out, n, form); }, ADAMANT_CUDA_CALL(cuda::gelu_forward(x, out, n, form, stream)));
}

void gelu_backward(const Tensor& d_out, const Tensor& x, Tensor d_x, std::int64_t n, GeluForm form,
                   const Stream& stream) {
  const KernelCall call = KernelCall::model("gelu_backward", x, stream);
  call.exact("d_out", d_out, n, Role::activation);
  call.exact("x", x, n, Role::activation);
  call.exact("d_x", d_x, n, Role::activation);
  call.run([&] { cpu::gelu_backward(d_out, x, d_x, n, form); },
           ADAMANT_CUDA_CALL(cuda::gelu_backward(d_out, x, d_x, n, form, stream)));
}

void dropout(const Tensor& in, Tensor out, std::int64_t numel, std::int64_t sample_numel, const DropoutArgs& args,
             const Stream& stream) {
  const KernelCall call = KernelCall::model("dropout", in, stream);
  ADAMANT_CHECK(numel >= 0, "dropout: negative size {}", numel);
  call.positive("sample_numel", sample_numel);
  ADAMANT_CHECK(args.first_element % kDropoutGroup == 0,
                "dropout: first_element {} is not a multiple of {}: one Philox draw decides {} consecutive elements, "
                "so a shard must start at a multiple of {} elements of the flattened batch",
                args.first_element, kDropoutGroup, kDropoutGroup, kDropoutGroup);
  ADAMANT_CHECK(args.first_element <= static_cast<std::uint64_t>(INT64_MAX - numel),
                "dropout: first_element {} + {} elements overflows", args.first_element, numel);
  // The samples that [first_element, first_element + numel) touches, counted from first_sample_index.
  const auto end = static_cast<std::int64_t>(args.first_element) + numel;
  check_dropout(call, args, (end + sample_numel - 1) / sample_numel);
  call.exact("in", in, numel, Role::activation);
  call.exact("out", out, numel, Role::activation);
  call.run([&] { cpu::dropout(in, out, numel, sample_numel, args); },
           ADAMANT_CUDA_CALL(cuda::dropout(in, out, numel, sample_numel, args, stream)));
}

void residual_add(const Tensor& a, const Tensor& b, Tensor out, std::int64_t n, const Stream& stream) {
  const KernelCall call = KernelCall::model("residual_add", a, stream);
  call.exact("a", a, n, Role::activation);
  call.exact("b", b, n, Role::activation);
  call.exact("out", out, n, Role::activation);
  call.run([&] { cpu::residual_add(a, b, out, n); }, ADAMANT_CUDA_CALL(cuda::residual_add(a, b, out, n, stream)));
}

namespace {

void check_tokens(const KernelCall& call, const Tensor& tokens, const EmbeddingShape& shape) {
  call.non_negative("batch", shape.batch);
  call.positive("seq", shape.seq);
  call.positive("channels", shape.channels);
  call.positive("vocab", shape.vocab);
  call.non_negative("vocab_start", shape.vocab_start);
  ADAMANT_CHECK(!call.on_cuda() || shape.batch * shape.seq < INT32_MAX / 2,
                "{}: {} tokens in one call; the CUDA kernel takes at most {}", call.op(), shape.batch * shape.seq,
                INT32_MAX / 2);
  call.exact("tokens", tokens, shape.batch * shape.seq, DType::i32);
  if (!tokens.device.is_cpu()) return;  // device ids: the model checked them on the host before the copy
  // An id outside [vocab_start, vocab_start + vocab) belongs to another rank's slice of the
  // table, so only a negative id is wrong here.
  for (const std::int32_t id : tokens.span<std::int32_t>()) {
    ADAMANT_CHECK(id >= 0, "{}: token id {} is negative", call.op(), id);
  }
}

}  // namespace

void embedding_forward(const Tensor& tokens, const Tensor& word, const Tensor& position, Tensor out,
                       const EmbeddingShape& shape, const Stream& stream) {
  const KernelCall call = KernelCall::model("embedding_forward", word, stream);
  check_tokens(call, tokens, shape);
  call.exact("word", word, shape.vocab * shape.channels, Role::weight);
  if (position.data != nullptr) call.at_least("position", position, shape.seq * shape.channels, Role::weight);
  call.exact("out", out, shape.batch * shape.seq * shape.channels, Role::activation);
  call.run([&] { cpu::embedding_forward(tokens, word, position, out, shape); },
           ADAMANT_CUDA_CALL(cuda::embedding_forward(tokens, word, position, out, shape, stream)));
}

void embedding_backward(const Tensor& d_out, const Tensor& tokens, Tensor d_word, Tensor d_position,
                        const EmbeddingShape& shape, const Stream& stream) {
  const KernelCall call = KernelCall::model("embedding_backward", d_out, stream);
  check_tokens(call, tokens, shape);
  call.exact("d_out", d_out, shape.batch * shape.seq * shape.channels, Role::activation);
  call.exact("d_word", d_word, shape.vocab * shape.channels, Role::weight_grad);
  if (d_position.data != nullptr) {
    call.at_least("d_position", d_position, shape.seq * shape.channels, Role::weight_grad);
  }
  call.run([&] { cpu::embedding_backward(d_out, tokens, d_word, d_position, shape); },
           ADAMANT_CUDA_CALL(cuda::embedding_backward(d_out, tokens, d_word, d_position, shape, stream)));
}

std::size_t classifier_chunk_elements(Device device) {
  return device.is_cuda() ? std::size_t{1} << 25 : std::size_t{1} << 23;
}

namespace {

void check_targets(const KernelCall& call, const Tensor& targets, std::int64_t rows, std::int64_t vocab) {
  call.exact("targets", targets, rows, DType::i32);
  if (!targets.device.is_cpu()) return;
  for (const std::int32_t id : targets.span<std::int32_t>()) {
    ADAMANT_CHECK(id >= 0 && id < vocab, "{}: target id {} outside the vocabulary [0, {})", call.op(), id, vocab);
  }
}

}  // namespace

void softmax_cross_entropy(Tensor logits, const Tensor& targets, Tensor losses, std::int64_t rows, std::int64_t vocab,
                           bool with_grad, double grad_scale, const Stream& stream) {
  const KernelCall call = KernelCall::model("softmax_cross_entropy", logits, stream);
  call.positive("vocab", vocab);
  call.exact("logits", logits, rows * vocab, Role::statistic);  // fp32 logits on a GPU, as the classifier's scratch
  check_targets(call, targets, rows, vocab);
  call.exact("losses", losses, rows, Role::statistic);
  call.run([&] { cpu::softmax_cross_entropy(logits, targets, losses, rows, vocab, with_grad, grad_scale); },
           ADAMANT_CUDA_CALL(
               cuda::softmax_cross_entropy(logits, targets, losses, rows, vocab, with_grad, grad_scale, stream)));
}

void fused_classifier(const Tensor& x, const Tensor& embedding, const Tensor& targets, Tensor losses,
                      Tensor logits_scratch, double grad_scale, Tensor d_x, Tensor d_embedding,
                      bool accumulate_d_embedding, const ClassifierShape& shape, const Stream& stream) {
  const KernelCall call = KernelCall::model("fused_classifier", x, stream);
  call.positive("channels", shape.channels);
  call.positive("vocab", shape.vocab);
  call.exact("x", x, shape.rows * shape.channels, Role::activation);
  call.exact("embedding", embedding, shape.vocab * shape.channels, Role::weight);
  check_targets(call, targets, shape.rows, shape.vocab);
  call.exact("losses", losses, shape.rows, Role::statistic);
  call.at_least("logits_scratch", logits_scratch, shape.vocab, Role::statistic);  // at least one row per chunk
  if (d_x.data != nullptr) {
    call.exact("d_x", d_x, shape.rows * shape.channels, Role::activation);
    call.exact("d_embedding", d_embedding, shape.vocab * shape.channels, Role::weight_grad);
  }
  call.run(
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
void check_vocab_parallel(const KernelCall& call, const Tensor& x, const Tensor& embedding, const Tensor& targets,
                          const Tensor& logits_scratch, const VocabParallelShape& shape) {
  ADAMANT_CHECK(shape.rows >= 0, "{}: {} rows", call.op(), shape.rows);
  call.positive("channels", shape.channels);
  call.positive("vocab", shape.vocab);
  ADAMANT_CHECK(shape.vocab_start >= 0, "{}: vocab_start {} is negative", call.op(), shape.vocab_start);
  call.exact("x", x, shape.rows * shape.channels, Role::activation);
  call.exact("embedding", embedding, shape.vocab * shape.channels, Role::weight);
  call.exact("targets", targets, shape.rows, DType::i32);
  call.at_least("logits_scratch", logits_scratch, shape.vocab, Role::statistic);  // at least one row per chunk
  if (!targets.device.is_cpu()) return;
  for (const std::int32_t id : targets.span<std::int32_t>()) {
    ADAMANT_CHECK(id >= 0, "{}: target id {} is negative", call.op(), id);
  }
}

}  // namespace

void vocab_parallel_classifier_stats(const Tensor& x, const Tensor& embedding, const Tensor& targets, Tensor stats,
                                     Tensor logits_scratch, const VocabParallelShape& shape, const Stream& stream) {
  const KernelCall call = KernelCall::model("vocab_parallel_classifier_stats", x, stream);
  check_vocab_parallel(call, x, embedding, targets, logits_scratch, shape);
  call.exact("stats", stats, 2 * shape.rows, Role::statistic);
  call.run([&] { cpu::vocab_parallel_classifier_stats(x, embedding, targets, stats, logits_scratch, shape); },
           ADAMANT_CUDA_CALL(
               cuda::vocab_parallel_classifier_stats(x, embedding, targets, stats, logits_scratch, shape, stream)));
}

void vocab_parallel_combine(const Tensor& gathered, int tp_size, std::int64_t rows, Tensor losses, Tensor lse,
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

void vocab_parallel_classifier_backward(const Tensor& x, const Tensor& embedding, const Tensor& targets,
                                        const Tensor& lse, double grad_scale, Tensor logits_scratch, Tensor d_x,
                                        Tensor d_embedding, bool accumulate_d_embedding,
                                        const VocabParallelShape& shape, const Stream& stream) {
  const KernelCall call = KernelCall::model("vocab_parallel_classifier_backward", x, stream);
  check_vocab_parallel(call, x, embedding, targets, logits_scratch, shape);
  call.exact("lse", lse, shape.rows, Role::statistic);
  call.exact("d_x", d_x, shape.rows * shape.channels, Role::activation);
  call.exact("d_embedding", d_embedding, shape.vocab * shape.channels, Role::weight_grad);
  call.run(
      [&] {
        cpu::vocab_parallel_classifier_backward(x, embedding, targets, lse, grad_scale, logits_scratch, d_x,
                                                d_embedding, accumulate_d_embedding, shape);
      },
      ADAMANT_CUDA_CALL(cuda::vocab_parallel_classifier_backward(x, embedding, targets, lse, grad_scale, logits_scratch,
                                                                 d_x, d_embedding, accumulate_d_embedding, shape,
                                                                 stream)));
}

}  // namespace adamant::kernels
