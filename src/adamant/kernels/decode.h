#pragma once
// Kernels of one decoding step with a key/value cache: every sequence of a batch adds
// one token at its own position. The prompt itself goes through the training kernels
// (flash attention); these handle the single new row per sequence.
//
// Dtypes: on a GPU the activations, weights and the cache are bf16; on the CPU every
// floating operand is fp32 or fp64 (one dtype). tokens and positions are i32 on the
// operands' device.
#include <cstdint>

#include "adamant/core/error.h"
#include "adamant/core/stream.h"
#include "adamant/core/tensor.h"
#include "adamant/kernels/decode_order.h"
#include "adamant/kernels/dispatch.h"
#include "adamant/kernels/gelu.h"
#include "adamant/kernels/gemm.h"
#include "adamant/kernels/linear.h"
#include "adamant/kernels/residual.h"

namespace adamant::kernels {

struct DecodeShape {
  std::int64_t batch = 0;     // sequences, one new token each
  std::int64_t capacity = 0;  // cached positions per sequence
  std::int64_t heads = 0;
  std::int64_t head_dim = 0;  // at most kMaxDecodeHeadDim
};

constexpr std::int64_t kMaxDecodeHeadDim = 128;

// What decode_linear does to a product before storing it.
enum class DecodeEpilogue {
  none,      // out = in weight^T (+ bias)
  gelu,      // out = gelu(in weight^T + bias)
  residual,  // out = residual + in weight^T + bias
};

struct DecodeLinearArgs {
  DecodeEpilogue epilogue = DecodeEpilogue::none;
  GeluForm gelu = GeluForm::exact;
};

// Rows that a GPU's matrix-vector kernel takes; beyond them decode_linear uses a GEMM.
constexpr std::int64_t kMaxDecodeGemvRows = 8;
constexpr std::int64_t kMaxDecodeTopK = 256;

namespace cpu {  // kernels/cpu/decode_cpu.cpp, decode_linear_cpu.cpp: the references, fp64 sums for attention
void decode_embedding(const Tensor& tokens, const Tensor& positions, const Tensor& word, const Tensor& position,
                      Tensor out, std::int64_t batch, std::int64_t channels);
void decode_attention(const Tensor& qkv, Tensor cache, const Tensor& positions, Tensor out, const DecodeShape& shape);
// bf16 weights and fp32 activations: the vectorised loop where the CPU has AVX2 and FMA, else the
// portable one; both are callable for tests.
void decode_linear_bf16(const Tensor& in, const Tensor& weight, const Tensor& bias, const Tensor& residual, Tensor out,
                        const LinearShape& shape, const DecodeLinearArgs& args);
void decode_linear_bf16_portable(const Tensor& in, const Tensor& weight, const Tensor& bias, const Tensor& residual,
                                 Tensor out, const LinearShape& shape, const DecodeLinearArgs& args);
bool decode_linear_bf16_vectorized_available();
void decode_top_k(const Tensor& logits, Tensor values, Tensor ids, std::int64_t rows, std::int64_t row_stride,
                  std::int64_t vocab, std::int64_t k, std::int32_t masked);
}  // namespace cpu

namespace cuda {  // kernels/cuda/decode_cuda.cpp over the launchers of decode*.cu; bf16 data
// vocab and places: rows of the word and position tables; ids outside them give NaN rows.
void decode_embedding(const Tensor& tokens, const Tensor& positions, const Tensor& word, const Tensor& position,
                      Tensor out, std::int64_t batch, std::int64_t channels, std::int64_t vocab, std::int64_t places,
                      const Stream& stream);
void decode_attention(const Tensor& qkv, Tensor cache, const Tensor& positions, Tensor out, const DecodeShape& shape,
                      const Stream& stream);
// rows 1..kMaxDecodeGemvRows, in_features a multiple of 8, in and weight 16-byte aligned.
void decode_linear(const Tensor& in, const Tensor& weight, const Tensor& bias, const Tensor& residual, Tensor out,
                   const LinearShape& shape, const DecodeLinearArgs& args, const Stream& stream);
void decode_top_k(const Tensor& logits, Tensor values, Tensor ids, std::int64_t rows, std::int64_t row_stride,
                  std::int64_t vocab, std::int64_t k, std::int32_t masked, const Stream& stream);
}  // namespace cuda

// out[b] = word[tokens[b]] + position[positions[b]] for b < batch; out [batch, channels].
inline void decode_embedding(const Tensor& tokens, const Tensor& positions, const Tensor& word, const Tensor& position,
                             Tensor out, std::int64_t batch, std::int64_t channels, const Stream& stream) {
  const KernelCall call = KernelCall::model("decode_embedding", word, stream);
  call.positive("batch", batch);
  call.positive("channels", channels);
  call.exact("tokens", tokens, batch, DType::i32);
  call.exact("positions", positions, batch, DType::i32);
  call.at_least("word", word, channels, Role::weight);
  call.at_least("position", position, channels, Role::weight);
  call.exact("out", out, batch * channels, Role::activation);
  const std::int64_t vocab = static_cast<std::int64_t>(word.numel()) / channels;
  const std::int64_t places = static_cast<std::int64_t>(position.numel()) / channels;
  if (!call.on_cuda()) {  // on a GPU the ids live in device memory and the kernel marks bad ones with NaN
    for (std::int64_t b = 0; b < batch; ++b) {
      const std::int32_t token = tokens.ptr<std::int32_t>()[b], place = positions.ptr<std::int32_t>()[b];
      ADAMANT_CHECK(token >= 0 && token < vocab, "decode_embedding: token {} outside the table of {} rows", token,
                    vocab);
      ADAMANT_CHECK(place >= 0 && place < places, "decode_embedding: position {} outside the table of {} positions",
                    place, places);
    }
  }
  call.run([&] { cpu::decode_embedding(tokens, positions, word, position, out, batch, channels); },
           ADAMANT_CUDA_CALL(
               cuda::decode_embedding(tokens, positions, word, position, out, batch, channels, vocab, places, stream)));
}

// qkv [batch, 3, heads, head_dim]: the new token's query, key and value. cache [batch, capacity,
// 3, heads, head_dim] (the layout of a prompt's qkv, so a prompt's projection is written into
// it directly; the query slots are unused). Stores the key and value of sequence b at
// cache[b, positions[b]], then out[b, h] = softmax(q . k_t / sqrt(head_dim)) v_t over
// t = 0..positions[b]; out [batch, heads, head_dim]. positions[b] < capacity. On a GPU
// head_dim is 32, 64, 80, 96 or 128.
inline void decode_attention(const Tensor& qkv, Tensor cache, const Tensor& positions, Tensor out,
                             const DecodeShape& shape, const Stream& stream) {
  const KernelCall call = KernelCall::model("decode_attention", qkv, stream);
  call.positive("batch", shape.batch);
  call.positive("capacity", shape.capacity);
  call.positive("heads", shape.heads);
  const std::int64_t D = shape.head_dim, W = shape.heads * D;
  ADAMANT_CHECK(D >= 1 && D <= kMaxDecodeHeadDim, "decode_attention: head_dim {}; it takes 1..{}", D,
                kMaxDecodeHeadDim);
  ADAMANT_CHECK(!call.on_cuda() || D == 32 || D == 64 || D == 80 || D == 96 || D == 128,
                "decode_attention: heads of {} dimensions; the GPU kernel takes 32, 64, 80, 96 or 128", D);
  call.exact("qkv", qkv, shape.batch * 3 * W, Role::activation);
  call.exact("cache", cache, shape.batch * shape.capacity * 3 * W, Role::activation);
  call.exact("positions", positions, shape.batch, DType::i32);
  call.exact("out", out, shape.batch * W, Role::activation);
  call.cuda_aligned("qkv", qkv, 16);
  call.cuda_aligned("cache", cache, 16);
  if (!call.on_cuda()) {
    for (std::int64_t b = 0; b < shape.batch; ++b) {
      const std::int32_t place = positions.ptr<std::int32_t>()[b];
      ADAMANT_CHECK(place >= 0 && place < shape.capacity,
                    "decode_attention: position {} of sequence {} outside the cache of {}", place, b, shape.capacity);
    }
  }
  call.run([&] { cpu::decode_attention(qkv, cache, positions, out, shape); },
           ADAMANT_CUDA_CALL(cuda::decode_attention(qkv, cache, positions, out, shape, stream)));
}

// A linear layer for the few rows of a decoding step, bound by reading its weights once:
// out[r, n] = epilogue(sum_k in[r, k] weight[n, k] + bias[n]) for r < shape.rows.
// weight [out_features, in_features] is bf16 (or, on the CPU only, fp32); in, bias and residual
// are the activation dtype (bf16 on a GPU, fp32 on the CPU); out is the activation dtype or fp32
// (logits, then with neither bias nor epilogue). An empty bias adds nothing; residual is read
// only by DecodeEpilogue::residual and is not out's memory. Sums are fp32. Any row count works:
// fp32 weights, and on a GPU more than kMaxDecodeGemvRows rows, go to the GEMM (in
// `workspace`, made with WorkspaceNeeds::matmul for `stream`) and the epilogue kernels.
inline void decode_linear(const Tensor& in, const Tensor& weight, const Tensor& bias, const Tensor& residual,
                          Tensor out, const LinearShape& shape, const DecodeLinearArgs& args, Workspace& workspace,
                          const Stream& stream) {
  const KernelCall call("decode_linear", in, stream);
  call.uses_matmul(workspace);
  call.positive("rows", shape.rows);
  call.positive("in_features", shape.in_features);
  call.positive("out_features", shape.out_features);
  const DType activation = call.on_cuda() ? DType::bf16 : DType::f32;
  const bool fp32_weights = weight.dtype == DType::f32;
  ADAMANT_CHECK(weight.dtype == DType::bf16 || (fp32_weights && !call.on_cuda()),
                "decode_linear: weights of {} on {}; the kernel takes bf16 weights (fp32 too on the CPU)",
                dtype_name(weight.dtype), call.device().str());
  call.exact("in", in, shape.rows * shape.in_features, activation);
  call.exact("weight", weight, shape.out_features * shape.in_features, weight.dtype);
  const bool widening = out.dtype != activation;
  call.exact("out", out, shape.rows * shape.out_features, widening ? DType::f32 : activation);
  ADAMANT_CHECK(!widening || (bias.data == nullptr && args.epilogue == DecodeEpilogue::none),
                "decode_linear: fp32 output from {} activations takes neither a bias nor an epilogue",
                dtype_name(activation));
  if (bias.data != nullptr) call.exact("bias", bias, shape.out_features, activation);
  if (args.epilogue == DecodeEpilogue::residual) {
    call.exact("residual", residual, shape.rows * shape.out_features, activation);
    ADAMANT_CHECK(residual.data != out.data, "decode_linear: residual and out are the same memory; give out its own");
  }
  // The GPU kernel reads 8 bf16 at a time from 16-byte aligned rows; other shapes take the GEMM.
  const bool gpu_kernel_fits =
      shape.rows <= kMaxDecodeGemvRows && shape.in_features % 8 == 0 && aligned_to(16, {&in, &weight});
  if (fp32_weights || (call.on_cuda() && !gpu_kernel_fits)) {
    const std::int64_t numel = shape.rows * shape.out_features;
    if (widening) {
      gemm(Transpose::no, Transpose::yes, shape.rows, shape.out_features, shape.in_features, 1.0, in, weight, 0.0, out,
           workspace, stream);
      return;
    }
    linear_forward(in, weight, bias, out, shape, workspace, stream);
    if (args.epilogue == DecodeEpilogue::gelu) gelu_forward(out, out, numel, args.gelu, stream);
    if (args.epilogue == DecodeEpilogue::residual) residual_add(residual, out, out, numel, stream);
    return;
  }
  call.run([&] { cpu::decode_linear_bf16(in, weight, bias, residual, out, shape, args); },
           ADAMANT_CUDA_CALL(cuda::decode_linear(in, weight, bias, residual, out, shape, args, stream)));
}

// The k largest of logits[r, 0..vocab) for every row r < rows (logits fp32 [rows, row_stride]),
// largest first, equal values by lower id first (decode_order_key's order); `masked` (-1: none)
// never counts. values fp32 and ids i32 [rows, k]; 1 <= k <= min(vocab, kMaxDecodeTopK), and
// k < vocab when an id is masked.
inline void decode_top_k(const Tensor& logits, Tensor values, Tensor ids, std::int64_t rows, std::int64_t row_stride,
                         std::int64_t vocab, std::int64_t k, std::int32_t masked, const Stream& stream) {
  const KernelCall call("decode_top_k", logits, stream);
  ADAMANT_CHECK(rows > 0 && vocab > 0 && vocab <= row_stride, "decode_top_k: {} rows of {} logits in rows of {}", rows,
                vocab, row_stride);
  const std::int64_t most = vocab < kMaxDecodeTopK ? vocab : kMaxDecodeTopK;
  ADAMANT_CHECK(k >= 1 && k <= most, "decode_top_k: k is {}; it takes 1..{}", k, most);
  ADAMANT_CHECK(masked < vocab, "decode_top_k: masked id {} outside the {} logits", masked, vocab);
  ADAMANT_CHECK(masked < 0 || k < vocab, "decode_top_k: k {} of {} logits with one masked", k, vocab);
  call.at_least("logits", logits, (rows - 1) * row_stride + vocab, DType::f32);
  call.exact("values", values, rows * k, DType::f32);
  call.exact("ids", ids, rows * k, DType::i32);
  call.run([&] { cpu::decode_top_k(logits, values, ids, rows, row_stride, vocab, k, masked); },
           ADAMANT_CUDA_CALL(cuda::decode_top_k(logits, values, ids, rows, row_stride, vocab, k, masked, stream)));
}

}  // namespace adamant::kernels
