// The flash attention dispatchers (kernels/dispatch.h).
#include "adamant/kernels/flash_attention.h"

#include <algorithm>
#include <climits>

#include "adamant/kernels/dispatch.h"

namespace adamant::kernels {

namespace {

void check_shape(const KernelCall& call, const AttentionShape& shape) {
  call.non_negative("batch", shape.batch);
  call.non_negative("seq", shape.seq);
  call.positive("heads", shape.heads);
  call.positive("head_dim", shape.head_dim);
  if (!call.on_cuda()) return;
  ADAMANT_CHECK(
      std::find(kCudaFlashHeadDims.begin(), kCudaFlashHeadDims.end(), shape.head_dim) != kCudaFlashHeadDims.end(),
      "{}: head_dim {} is not supported on CUDA; use 64, 80, 96 or 128 (hidden_size / num_attention_heads)", call.op(),
      shape.head_dim);
  ADAMANT_CHECK(shape.heads <= 65535 && shape.batch <= 65535,
                "{}: batch {} and heads {} must each be at most 65535 (the kernel's grid); split the batch", call.op(),
                shape.batch, shape.heads);
  ADAMANT_CHECK(shape.seq <= INT_MAX / 2, "{}: seq {} is too long", call.op(), shape.seq);
}

void check_dropout(const KernelCall& call, const DropoutArgs& args, std::int64_t batch) {
  ADAMANT_CHECK(args.probability >= 0.0f && args.probability < 1.0f, "{}: dropout probability {} is outside [0, 1)",
                call.op(), args.probability);
  ADAMANT_CHECK(args.site < (1u << kDropoutSiteBits), "{}: dropout site {} exceeds {} bits", call.op(), args.site,
                kDropoutSiteBits);
  ADAMANT_CHECK(args.first_sample_index + static_cast<std::uint64_t>(batch) <= kMaxDropoutSample,
                "{}: sample index {} is beyond the dropout generator's range", call.op(), args.first_sample_index);
}

// [batch, seq, 3, heads, head_dim] and [batch, seq, heads, head_dim] activations, 16-byte aligned on a GPU.
void check_activation(const KernelCall& call, const char* name, const Tensor& t, std::int64_t numel) {
  call.exact(name, t, numel, Role::activation);
  call.cuda_aligned(name, t, 16);
}

}  // namespace

void flash_attention_forward(const Tensor& qkv, Tensor out, Tensor logsumexp, const AttentionShape& shape,
                             const DropoutArgs& dropout_args, const Stream& stream) {
  const KernelCall call = KernelCall::model("flash_attention_forward", qkv, stream);
  check_shape(call, shape);
  check_dropout(call, dropout_args, shape.batch);
  const std::int64_t tokens = shape.batch * shape.seq, channels = shape.heads * shape.head_dim;
  check_activation(call, "qkv", qkv, tokens * 3 * channels);
  check_activation(call, "out", out, tokens * channels);
  call.exact("logsumexp", logsumexp, tokens * shape.heads, Role::statistic);
  if (tokens == 0) return;
  call.run([&] { cpu::flash_attention_forward(qkv, out, logsumexp, shape, dropout_args); },
           ADAMANT_CUDA_CALL(cuda::flash_attention_forward(qkv, out, logsumexp, shape, dropout_args, stream)));
}

void flash_attention_backward(const Tensor& d_out, const Tensor& qkv, const Tensor& out, const Tensor& logsumexp,
                              Tensor d_qkv, const AttentionShape& shape, const DropoutArgs& dropout_args,
                              const Stream& stream) {
  const KernelCall call = KernelCall::model("flash_attention_backward", qkv, stream);
  check_shape(call, shape);
  check_dropout(call, dropout_args, shape.batch);
  const std::int64_t tokens = shape.batch * shape.seq, channels = shape.heads * shape.head_dim;
  check_activation(call, "d_out", d_out, tokens * channels);
  check_activation(call, "qkv", qkv, tokens * 3 * channels);
  check_activation(call, "out", out, tokens * channels);
  call.exact("logsumexp", logsumexp, tokens * shape.heads, Role::statistic);
  check_activation(call, "d_qkv", d_qkv, tokens * 3 * channels);
  // d_qkv is written while the inputs are still read (on a GPU it doubles as scratch).
  const auto* d_qkv_begin = static_cast<const char*>(d_qkv.data);
  const auto* d_qkv_end = d_qkv_begin + d_qkv.bytes();
  for (const Tensor* input : {&d_out, &qkv, &out, &logsumexp}) {
    const auto* begin = static_cast<const char*>(input->data);
    ADAMANT_CHECK(begin + input->bytes() <= d_qkv_begin || begin >= d_qkv_end,
                  "{}: d_qkv overlaps an input; give d_qkv its own memory", call.op());
  }
  if (tokens == 0) return;
  call.run([&] { cpu::flash_attention_backward(d_out, qkv, out, logsumexp, d_qkv, shape, dropout_args); },
           ADAMANT_CUDA_CALL(
               cuda::flash_attention_backward(d_out, qkv, out, logsumexp, d_qkv, shape, dropout_args, stream)));
}

}  // namespace adamant::kernels
