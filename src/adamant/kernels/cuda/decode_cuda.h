#pragma once
// CUDA decoding-step kernels (kernels/decode.h) on bf16 operands, called by the
// dispatcher in kernels/decode.cpp once the operands are checked. vocab and places:
// rows of the word and position tables; ids outside them give NaN rows.
#include <cstdint>

#include "adamant/kernels/decode.h"

namespace adamant::kernels::cuda {

void decode_embedding(const Tensor& tokens, const Tensor& positions, const Tensor& word, const Tensor& position,
                      Tensor out, std::int64_t batch, std::int64_t channels, std::int64_t vocab, std::int64_t places,
                      const Stream& stream);
void decode_attention(const Tensor& qkv, Tensor cache, const Tensor& positions, Tensor out, const DecodeShape& shape,
                      const Stream& stream);
// bf16 weights and activations, rows 1..kMaxDecodeGemvRows.
void decode_linear(const Tensor& in, const Tensor& weight, const Tensor& bias, const Tensor& residual, Tensor out,
                   const LinearShape& shape, const DecodeLinearArgs& args, const Stream& stream);
void decode_top_k(const Tensor& logits, Tensor values, Tensor ids, std::int64_t rows, std::int64_t row_stride,
                  std::int64_t vocab, std::int64_t k, std::int32_t masked, const Stream& stream);

}  // namespace adamant::kernels::cuda
