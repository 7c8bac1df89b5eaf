// The CUDA entry points of causal attention (model_kernels_cuda.h): check the
// Tensors, turn them and the dropout arguments into the plain launch arguments of
// attention_launchers.h, make the data's GPU current, and turn launch failures
// into adamant::Error.
#include <cuda_runtime.h>

#include <cstdint>

#include "adamant/core/cuda_launch_guard.h"
#include "adamant/kernels/cuda/attention_launchers.h"
#include "adamant/kernels/cuda/attention_operands.h"
#include "adamant/kernels/cuda/model_kernels_cuda.h"

namespace adamant::kernels::cuda {

namespace {

namespace launchers = attention_launchers;
using attention_operands::bits_of;
using attention_operands::check_launch;
using attention_operands::check_shape;
using attention_operands::dropout_of;
using attention_operands::mutable_bits_of;
using attention_operands::problem_of;

void check_operand(const char* op, const char* name, const Tensor& t, Device device, std::int64_t numel,
                   std::size_t alignment, bool at_least = false) {
  attention_operands::check_operand(op, name, t, DType::bf16, device, numel, alignment, at_least);
}

}  // namespace

void attention_forward(const Tensor& qkv, Tensor probs, Tensor out, const AttentionShape& shape,
                       const DropoutArgs& dropout_args, const Stream& stream) {
  constexpr const char* kOp = "attention_forward";
  check_shape(kOp, shape, launchers::kSupportedHeadDims);
  const launchers::Dropout dropout = dropout_of(kOp, dropout_args, shape.batch);
  ADAMANT_CHECK(qkv.device.is_cuda(), "{}: qkv is on {}; the CUDA kernel needs GPU memory", kOp, qkv.device.str());
  const std::int64_t tokens = shape.batch * shape.seq, channels = shape.heads * shape.head_dim;
  check_operand(kOp, "qkv", qkv, qkv.device, tokens * 3 * channels, 16);
  check_operand(kOp, "probs", probs, qkv.device, shape.batch * shape.heads * shape.seq * shape.seq, 2);
  check_operand(kOp, "out", out, qkv.device, tokens * channels, 16);
  if (tokens == 0) return;
  const CudaLaunchGuard guard(qkv.device, kOp);
  const launchers::ForwardOperands operands{bits_of(qkv), mutable_bits_of(probs), mutable_bits_of(out)};
  check_launch(launchers::attention_forward(operands, problem_of(shape), dropout, cuda_stream_of(stream)), kOp, shape);
}

void attention_backward(const Tensor& d_out, const Tensor& qkv, const Tensor& probs, Tensor d_probs_scratch,
                        Tensor d_qkv, const AttentionShape& shape, const DropoutArgs& dropout_args,
                        const Stream& stream) {
  constexpr const char* kOp = "attention_backward";
  check_shape(kOp, shape, launchers::kSupportedHeadDims);
  const launchers::Dropout dropout = dropout_of(kOp, dropout_args, shape.batch);
  ADAMANT_CHECK(qkv.device.is_cuda(), "{}: qkv is on {}; the CUDA kernel needs GPU memory", kOp, qkv.device.str());
  const std::int64_t tokens = shape.batch * shape.seq, channels = shape.heads * shape.head_dim;
  const std::int64_t probs_numel = shape.batch * shape.heads * shape.seq * shape.seq;
  check_operand(kOp, "d_out", d_out, qkv.device, tokens * channels, 16);
  check_operand(kOp, "qkv", qkv, qkv.device, tokens * 3 * channels, 16);
  check_operand(kOp, "probs", probs, qkv.device, probs_numel, 2);
  check_operand(kOp, "d_probs_scratch", d_probs_scratch, qkv.device, probs_numel, 2, /*at_least=*/true);
  check_operand(kOp, "d_qkv", d_qkv, qkv.device, tokens * 3 * channels, 16);
  if (tokens == 0) return;
  const CudaLaunchGuard guard(qkv.device, kOp);
  const launchers::BackwardOperands operands{bits_of(d_out), bits_of(qkv), bits_of(probs),
                                             mutable_bits_of(d_probs_scratch), mutable_bits_of(d_qkv)};
  check_launch(launchers::attention_backward(operands, problem_of(shape), dropout, cuda_stream_of(stream)), kOp, shape);
}

}  // namespace adamant::kernels::cuda
