#pragma once
// CPU decoding-step kernels (kernels/decode.h), fp32 or fp64: the reference of the CUDA
// ones. Operands were checked by the dispatcher (kernels/decode.cpp).
#include "adamant/kernels/decode.h"

namespace adamant::kernels::cpu {

void decode_embedding(const Tensor& tokens, const Tensor& positions, const Tensor& word, const Tensor& position,
                      Tensor out, std::int64_t batch, std::int64_t channels);
void decode_attention(const Tensor& qkv, Tensor cache, const Tensor& positions, Tensor out, const DecodeShape& shape);

}  // namespace adamant::kernels::cpu
