#pragma once
// The CUDA entry points of flash attention (kernels/flash_attention.h): bf16 qkv,
// out, d_out and d_qkv, fp32 logsumexp, head_dim 64, 80, 96 or 128.
#include "adamant/core/stream.h"
#include "adamant/core/tensor.h"
#include "adamant/kernels/attention.h"
#include "adamant/kernels/dropout.h"

namespace adamant::kernels::cuda {

void flash_attention_forward(const Tensor& qkv, Tensor out, Tensor logsumexp, const AttentionShape& shape,
                             const DropoutArgs& dropout_args, const Stream& stream);
void flash_attention_backward(const Tensor& d_out, const Tensor& qkv, const Tensor& out, const Tensor& logsumexp,
                              Tensor d_qkv, const AttentionShape& shape, const DropoutArgs& dropout_args,
                              const Stream& stream);

}  // namespace adamant::kernels::cuda
