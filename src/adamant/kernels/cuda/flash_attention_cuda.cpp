// The CUDA entry points of flash attention (flash_attention_cuda.h): check the
// Tensors, turn them and the dropout arguments into the plain launch arguments of
// flash_attention_launchers.h, make the data's GPU current, and turn launch
// failures into adamant::Error.
#include "adamant/kernels/cuda/flash_attention_cuda.h"

#include <cuda_runtime.h>

#include <cstdint>

#include "adamant/core/cuda_launch_guard.h"
#include "adamant/core/error.h"
#include "adamant/kernels/cuda/attention_operands.h"
#include "adamant/kernels/cuda/flash_attention_launchers.h"

namespace adamant::kernels::cuda {

namespace {

namespace launchers = flash_attention_launchers;
using attention_operands::bits_of;
using attention_operands::check_launch;
using attention_operands::check_operand;
using attention_operands::check_shape;
using attention_operands::dropout_of;
using attention_operands::mutable_bits_of;
using attention_operands::problem_of;

}  // namespace

void flash_attention_forward(const Tensor& qkv, Tensor out, Tensor logsumexp, const AttentionShape& shape,
                             const DropoutArgs& dropout_args, const Stream& stream) {
  constexpr const char* kOp = "flash_attention_forward";
  check_shape(kOp, shape, launchers::kSupportedHeadDims);
  const launchers::Dropout dropout = dropout_of(kOp, dropout_args, shape.batch);
  ADAMANT_CHECK(qkv.device.is_cuda(), "{}: qkv is on {}; the CUDA kernel needs GPU memory", kOp, qkv.device.str());
  const std::int64_t tokens = shape.batch * shape.seq, channels = shape.heads * shape.head_dim;
  check_operand(kOp, "qkv", qkv, DType::bf16, qkv.device, tokens * 3 * channels, 16);
  check_operand(kOp, "out", out, DType::bf16, qkv.device, tokens * channels, 16);
  check_operand(kOp, "logsumexp", logsumexp, DType::f32, qkv.device, tokens * shape.heads, 4);
  if (tokens == 0) return;
  const CudaLaunchGuard guard(qkv.device, kOp);
  const launchers::ForwardOperands operands{bits_of(qkv), mutable_bits_of(out), static_cast<float*>(logsumexp.data)};
  check_launch(launchers::flash_attention_forward(operands, problem_of(shape), dropout, cuda_stream_of(stream)), kOp,
               shape);
}

void flash_attention_backward(const Tensor& d_out, const Tensor& qkv, const Tensor& out, const Tensor& logsumexp,
                              Tensor d_qkv, const AttentionShape& shape, const DropoutArgs& dropout_args,
                              const Stream& stream) {
  constexpr const char* kOp = "flash_attention_backward";
  check_shape(kOp, shape, launchers::kSupportedHeadDims);
  const launchers::Dropout dropout = dropout_of(kOp, dropout_args, shape.batch);
  ADAMANT_CHECK(qkv.device.is_cuda(), "{}: qkv is on {}; the CUDA kernel needs GPU memory", kOp, qkv.device.str());
  const std::int64_t tokens = shape.batch * shape.seq, channels = shape.heads * shape.head_dim;
  check_operand(kOp, "d_out", d_out, DType::bf16, qkv.device, tokens * channels, 16);
  check_operand(kOp, "qkv", qkv, DType::bf16, qkv.device, tokens * 3 * channels, 16);
  check_operand(kOp, "out", out, DType::bf16, qkv.device, tokens * channels, 16);
  check_operand(kOp, "logsumexp", logsumexp, DType::f32, qkv.device, tokens * shape.heads, 4);
  check_operand(kOp, "d_qkv", d_qkv, DType::bf16, qkv.device, tokens * 3 * channels, 16);
  // d_qkv doubles as scratch before it is written, so it must not overlap an input.
  const auto* d_qkv_begin = static_cast<const char*>(d_qkv.data);
  const auto* d_qkv_end = d_qkv_begin + d_qkv.bytes();
  for (const Tensor* input : {&d_out, &qkv, &out}) {
    const auto* begin = static_cast<const char*>(input->data);
    ADAMANT_CHECK(begin + input->bytes() <= d_qkv_begin || begin >= d_qkv_end,
                  "{}: d_qkv overlaps an input; give d_qkv its own memory", kOp);
  }
  if (tokens == 0) return;
  const CudaLaunchGuard guard(qkv.device, kOp);
  const launchers::BackwardOperands operands{bits_of(d_out), bits_of(qkv), bits_of(out),
                                             static_cast<const float*>(logsumexp.data), mutable_bits_of(d_qkv)};
  check_launch(launchers::flash_attention_backward(operands, problem_of(shape), dropout, cuda_stream_of(stream)), kOp,
               shape);
}

}  // namespace adamant::kernels::cuda
