#pragma once
// Token + learned absolute position embeddings (GPT-2/GPT-3), optionally over a
// vocabulary-parallel slice of the word table (Megatron's VocabParallelEmbedding:
// each tensor-parallel rank looks up the tokens of its slice, the ranks' outputs
// are summed).
#include <climits>
#include <cstddef>
#include <cstdint>

#include "adamant/core/stream.h"
#include "adamant/core/tensor.h"
#include "adamant/kernels/dispatch.h"
#include "adamant/kernels/embedding_scratch.h"

namespace adamant::kernels {

struct EmbeddingShape {
  std::int64_t batch = 0;
  std::int64_t seq = 0;
  std::int64_t channels = 0;
  std::int64_t vocab = 0;        // rows of `word`: the (padded) vocabulary, or this rank's slice of it
  std::int64_t vocab_start = 0;  // `word` holds rows [vocab_start, vocab_start + vocab) of the whole table
};

namespace cpu {
void embedding_forward(const Tensor& tokens, const Tensor& word, const Tensor& position, Tensor out,
                       const EmbeddingShape& shape);
void embedding_backward(const Tensor& d_out, const Tensor& tokens, Tensor d_word, Tensor d_position,
                        const EmbeddingShape& shape);
}  // namespace cpu

// Launchers in kernels/cuda/embedding.cu (bf16 tables and activations, fp32 or bf16 gradients);
// each returns its cudaError_t. Token ids are not checked on the GPU: forward writes NaN
// rows for negative ids and zero word rows for ids outside the slice, which backward
// ignores. A null position / d_position is skipped.
namespace cuda {
int embedding_forward(const std::int32_t* tokens, const std::uint16_t* word, const std::uint16_t* position,
                      std::uint16_t* out, std::int64_t batch, std::int64_t seq, std::int64_t channels,
                      std::int64_t vocab, std::int64_t vocab_start, const CudaLaunch& launch);
// The word gradient sorts the positions by table row in `scratch`, laid out by
// kernels/embedding_scratch.h.
int embedding_backward(const std::uint16_t* d_out, const std::int32_t* tokens, void* d_word, void* d_position,
                       DType grad_dtype, void* scratch, std::size_t scratch_bytes, std::int64_t batch, std::int64_t seq,
                       std::int64_t channels, std::int64_t vocab, std::int64_t vocab_start, const CudaLaunch& launch);
}  // namespace cuda

// fp32 elements of the scratch embedding_backward needs on `device` for `rows` tokens of
// `channels`: on a GPU the sort of the positions by table row and the partial sums of the
// rows that span chunks of it (about 20 + channels / 16 bytes a token, a few MiB at
// GPT-3's shapes); none on the CPU.
inline std::int64_t embedding_backward_scratch_floats(Device device, std::int64_t rows, std::int64_t channels) {
  if (!device.is_cuda()) return 0;
  const std::size_t bytes = embedding_scratch::layout(rows, channels).total;
  return static_cast<std::int64_t>((bytes + sizeof(float) - 1) / sizeof(float));
}

namespace detail {

inline void check_tokens(const KernelCall& call, const Tensor& tokens, const EmbeddingShape& shape) {
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

}  // namespace detail

// out[b, t] = word[tokens[b, t] - vocab_start] + position[t], with a zero word row for a
// token outside [vocab_start, vocab_start + vocab). tokens: i32 [batch, seq], ids >= 0.
// An empty position (data == nullptr) adds no position embedding (all but one
// tensor-parallel rank, so that the sum over ranks adds it once).
inline void embedding_forward(const Tensor& tokens, const Tensor& word, const Tensor& position, Tensor out,
                              const EmbeddingShape& shape, const Stream& stream) {
  const KernelCall call = KernelCall::model("embedding_forward", word, stream);
  detail::check_tokens(call, tokens, shape);
  call.exact("word", word, shape.vocab * shape.channels, Role::weight);
  if (position.data != nullptr) call.at_least("position", position, shape.seq * shape.channels, Role::weight);
  call.exact("out", out, shape.batch * shape.seq * shape.channels, Role::activation);
  call.run([&] { cpu::embedding_forward(tokens, word, position, out, shape); },
           ADAMANT_CUDA_CALL(cuda::embedding_forward(static_cast<const std::int32_t*>(tokens.data), bits16_of(word),
                                                     bits16_of(position), bits16_of(out), shape.batch, shape.seq,
                                                     shape.channels, shape.vocab, shape.vocab_start,
                                                     launch.vectorized_if(aligned_to(16, {&word, &position, &out})))));
}

// d_word[tokens[b, t] - vocab_start] += d_out[b, t] for the tokens of the slice, and
// d_position[t] += sum over b of d_out[b, t] (both accumulate: the word table is shared
// with the output layer; on a GPU both fp32 or both bf16, Role::buffer_grad). An empty
// d_position (data == nullptr) is skipped. `scratch`
// (fp32, at least embedding_backward_scratch_floats elements) is the GPU kernel's; the
// CPU needs none.
inline void embedding_backward(const Tensor& d_out, const Tensor& tokens, Tensor d_word, Tensor d_position,
                               Tensor scratch, const EmbeddingShape& shape, const Stream& stream) {
  const KernelCall call = KernelCall::model("embedding_backward", d_out, stream);
  detail::check_tokens(call, tokens, shape);
  call.exact("d_out", d_out, shape.batch * shape.seq * shape.channels, Role::activation);
  call.exact("d_word", d_word, shape.vocab * shape.channels, Role::buffer_grad);
  if (d_position.data != nullptr) {
    call.at_least("d_position", d_position, shape.seq * shape.channels, Role::buffer_grad);
    ADAMANT_CHECK(d_position.dtype == d_word.dtype,
                  "embedding_backward: d_position is {}, d_word {}; both are the gradient buffer's",
                  dtype_name(d_position.dtype), dtype_name(d_word.dtype));
  }
  if (call.on_cuda()) {
    call.at_least("scratch", scratch,
                  embedding_backward_scratch_floats(d_out.device, shape.batch * shape.seq, shape.channels), DType::f32);
  }
  call.run([&] { cpu::embedding_backward(d_out, tokens, d_word, d_position, shape); },
           ADAMANT_CUDA_CALL(cuda::embedding_backward(
               bits16_of(d_out), static_cast<const std::int32_t*>(tokens.data), d_word.data, d_position.data,
               d_word.dtype, scratch.data, scratch.numel() * sizeof(float), shape.batch, shape.seq, shape.channels,
               shape.vocab, shape.vocab_start, launch.vectorized_if(aligned_to(16, {&d_out, &d_word, &d_position})))));
}

}  // namespace adamant::kernels
