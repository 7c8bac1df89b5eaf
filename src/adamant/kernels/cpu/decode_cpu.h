#pragma once
// CPU decoding-step kernels (kernels/decode.h), fp32 or fp64: the reference of the CUDA
// ones. Operands were checked by the dispatcher (kernels/decode.cpp).
#include "adamant/kernels/decode.h"

namespace adamant::kernels::cpu {

void decode_embedding(const Tensor& tokens, const Tensor& positions, const Tensor& word, const Tensor& position,
                      Tensor out, std::int64_t batch, std::int64_t channels);
void decode_attention(const Tensor& qkv, Tensor cache, const Tensor& positions, Tensor out, const DecodeShape& shape);

// decode_linear with bf16 weights and fp32 activations (decode_linear_cpu.cpp): the vectorised
// loop where the CPU has AVX2 and FMA, else the portable one; both are callable for tests.
void decode_linear_bf16(const Tensor& in, const Tensor& weight, const Tensor& bias, const Tensor& residual, Tensor out,
                        const LinearShape& shape, const DecodeLinearArgs& args);
void decode_linear_bf16_portable(const Tensor& in, const Tensor& weight, const Tensor& bias, const Tensor& residual,
                                 Tensor out, const LinearShape& shape, const DecodeLinearArgs& args);
bool decode_linear_bf16_vectorized_available();

void decode_top_k(const Tensor& logits, Tensor values, Tensor ids, std::int64_t rows, std::int64_t row_stride,
                  std::int64_t vocab, std::int64_t k, std::int32_t masked);

}  // namespace adamant::kernels::cpu
