#pragma once
// Kernels of one decoding step with a key/value cache: every sequence of a batch adds
// one token at its own position. The prompt itself goes through the training kernels
// (flash attention); these handle the single new row per sequence.
//
// Dtypes: on a GPU the activations, weights and the cache are bf16; on the CPU every
// floating operand is fp32 or fp64 (one dtype). tokens and positions are i32 on the
// operands' device.
#include <bit>
#include <cstdint>

#include "adamant/core/stream.h"
#include "adamant/core/tensor.h"
#include "adamant/kernels/gelu.h"
#include "adamant/kernels/linear.h"

namespace adamant::kernels {

struct DecodeShape {
  std::int64_t batch = 0;     // sequences, one new token each
  std::int64_t capacity = 0;  // cached positions per sequence
  std::int64_t heads = 0;
  std::int64_t head_dim = 0;  // at most kMaxDecodeHeadDim
};

constexpr std::int64_t kMaxDecodeHeadDim = 128;

// out[b] = word[tokens[b]] + position[positions[b]] for b < batch; out [batch, channels].
void decode_embedding(const Tensor& tokens, const Tensor& positions, const Tensor& word, const Tensor& position,
                      Tensor out, std::int64_t batch, std::int64_t channels, const Stream& stream);

// qkv [batch, 3, heads, head_dim]: the new token's query, key and value. cache [batch, capacity,
// 3, heads, head_dim] (the layout of a prompt's qkv, so a prompt's projection is written into
// it directly; the query slots are unused). Stores the key and value of sequence b at
// cache[b, positions[b]], then out[b, h] = softmax(q . k_t / sqrt(head_dim)) v_t over
// t = 0..positions[b]; out [batch, heads, head_dim]. positions[b] < capacity.
void decode_attention(const Tensor& qkv, Tensor cache, const Tensor& positions, Tensor out, const DecodeShape& shape,
                      const Stream& stream);

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

// A linear layer for the few rows of a decoding step, bound by reading its weights once:
// out[r, n] = epilogue(sum_k in[r, k] weight[n, k] + bias[n]) for r < shape.rows.
// weight [out_features, in_features] is bf16 (or, on the CPU only, fp32); in, bias and residual
// are the activation dtype (bf16 on a GPU, fp32 on the CPU); out is the activation dtype or fp32
// (logits). An empty bias adds nothing; residual is read only by DecodeEpilogue::residual and
// may alias out. Sums are fp32. Any row count works: on a GPU, more than a few rows go to a GEMM.
void decode_linear(const Tensor& in, const Tensor& weight, const Tensor& bias, const Tensor& residual, Tensor out,
                   const LinearShape& shape, const DecodeLinearArgs& args, const Stream& stream);

// Rows that a GPU's matrix-vector kernel takes; beyond them decode_linear uses a GEMM.
constexpr std::int64_t kMaxDecodeGemvRows = 8;
constexpr std::int64_t kMaxDecodeTopK = 256;

// The k largest of logits[r, 0..vocab) for every row r < rows (logits fp32 [rows, row_stride]),
// largest first, equal values by lower id first; `masked` (-1: none) never counts. values fp32
// and ids i32 [rows, k]; 1 <= k <= min(vocab, kMaxDecodeTopK), vocab <= row_stride.
// The order decode_top_k sorts by: unsigned keys that order like the floats (-0 as +0).
constexpr std::uint32_t decode_order_key(float value) {
  std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  if (bits == 0x80000000u) bits = 0;
  return (bits & 0x80000000u) != 0 ? ~bits : bits | 0x80000000u;
}

void decode_top_k(const Tensor& logits, Tensor values, Tensor ids, std::int64_t rows, std::int64_t row_stride,
                  std::int64_t vocab, std::int64_t k, std::int32_t masked, const Stream& stream);

}  // namespace adamant::kernels
