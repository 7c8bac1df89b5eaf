#pragma once
// Causal multi-head self-attention that keeps no probabilities (FlashAttention-2):
// forward stores the output and each row's logsumexp, backward recomputes the
// probabilities from them tile by tile. The model's attention on both backends: the
// CPU runs the same blocked algorithm as the GPU (kernels/cpu/flash_attention_cpu.cpp),
// so the activations kept for backward are the same. cpu::attention_forward/backward
// (kernels/attention.h) materialise the softmax and are the reference both are tested
// against.
//
// Dtypes: on the CPU every operand has qkv's dtype (fp32 or fp64); on a GPU qkv, out,
// d_out and d_qkv are bf16 (16-byte aligned) and logsumexp fp32, head_dim one of
// kCudaFlashHeadDims.
#include <algorithm>
#include <array>
#include <climits>
#include <cstddef>
#include <cstdint>

#include "adamant/core/stream.h"
#include "adamant/core/tensor.h"
#include "adamant/kernels/attention.h"
#include "adamant/kernels/dispatch.h"
#include "adamant/kernels/dropout.h"
#include "adamant/kernels/flash_attention_scores.h"
#include "adamant/kernels/linear.h"

namespace adamant::kernels {

// The head sizes the CUDA kernels are instantiated for.
inline constexpr std::array<std::int64_t, 4> kCudaFlashHeadDims{64, 80, 96, 128};

// The GPU's backward needs flash_attention_statistics_bytes (kernels/flash_attention_scores.h)
// of scratch for the row statistics its passes share.
inline std::size_t flash_attention_statistics_bytes(const AttentionShape& shape) {
  return flash_attention_statistics_bytes(shape.batch, shape.heads, shape.seq);
}

// A scratch of flash_attention_scores_bytes (kernels/flash_attention_scores.h) lets the GPU's
// backward read the score gradients its key pass stored instead of recomputing them. A
// scratch for fewer (sample, head) slots (at least one: flash_attention_scores_bytes(1, 1,
// seq) each) runs the backward's two passes over as even groups of slots as it holds.
inline std::size_t flash_attention_scores_bytes(const AttentionShape& shape) {
  return flash_attention_scores_bytes(shape.batch, shape.heads, shape.seq);
}

namespace cpu {
void flash_attention_forward(const Tensor& qkv, Tensor out, Tensor logsumexp, const AttentionShape& shape,
                             const DropoutArgs& dropout_args);
void flash_attention_backward(const Tensor& d_out, const Tensor& qkv, const Tensor& out, const Tensor& logsumexp,
                              Tensor d_qkv, const AttentionShape& shape, const DropoutArgs& dropout_args);
}  // namespace cpu

namespace cuda {
void flash_attention_forward(const Tensor& qkv, Tensor out, Tensor logsumexp, const AttentionShape& shape,
                             const DropoutArgs& dropout_args, const Stream& stream);
void flash_attention_backward(const Tensor& d_out, const Tensor& qkv, const Tensor& out, const Tensor& logsumexp,
                              Tensor d_qkv, const AttentionShape& shape, const DropoutArgs& dropout_args,
                              const Stream& stream, const Tensor& statistics, const Tensor& d_scores,
                              const ColumnSumsOut& bias);
}  // namespace cuda

namespace detail {

inline void check_shape(const KernelCall& call, const AttentionShape& shape) {
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

// [batch, seq, 3, heads, head_dim] and [batch, seq, heads, head_dim] activations, 16-byte aligned on a GPU.
inline void check_activation(const KernelCall& call, const char* name, const Tensor& t, std::int64_t numel) {
  call.exact(name, t, numel, Role::activation);
  call.cuda_aligned(name, t, 16);
}

}  // namespace detail

// qkv [batch, seq, 3, heads, head_dim]; out [batch, seq, heads, head_dim] =
// dropout(softmax(q k^T / sqrt(head_dim), causal)) v; logsumexp [batch, heads, seq]
// = log sum_{j <= i} exp(q_i . k_j / sqrt(head_dim)). Attention dropout draws as
// kernels/attention_dropout_layout.h lays out.
inline void flash_attention_forward(const Tensor& qkv, Tensor out, Tensor logsumexp, const AttentionShape& shape,
                                    const DropoutArgs& dropout_args, const Stream& stream) {
  const KernelCall call = KernelCall::model("flash_attention_forward", qkv, stream);
  detail::check_shape(call, shape);
  detail::check_dropout(call, dropout_args, shape.batch);
  const std::int64_t tokens = shape.batch * shape.seq, channels = shape.heads * shape.head_dim;
  detail::check_activation(call, "qkv", qkv, tokens * 3 * channels);
  detail::check_activation(call, "out", out, tokens * channels);
  call.exact("logsumexp", logsumexp, tokens * shape.heads, Role::statistic);
  if (tokens == 0) return;
  call.run([&] { cpu::flash_attention_forward(qkv, out, logsumexp, shape, dropout_args); },
           ADAMANT_CUDA_CALL(cuda::flash_attention_forward(qkv, out, logsumexp, shape, dropout_args, stream)));
}

// d_qkv (overwritten, must not overlap the inputs) from d_out, given forward's out
// and logsumexp and the same dropout arguments. statistics: on a GPU, a scratch of at least
// flash_attention_statistics_bytes, 16-byte aligned (the CPU takes none and ignores it).
// d_scores: empty, or a score scratch for one or more (sample, head) slots (see
// flash_attention_scores_bytes). With a non-empty bias.d_bias, also the bias gradient of the
// layer whose output qkv is: the column sums of d_qkv as stored, over rows of bias.columns = 3
// heads head_dim elements (a GPU sums each warp's rows as its passes store them, instead of
// reading d_qkv again).
inline void flash_attention_backward(const Tensor& d_out, const Tensor& qkv, const Tensor& out, const Tensor& logsumexp,
                                     Tensor d_qkv, const AttentionShape& shape, const DropoutArgs& dropout_args,
                                     const Stream& stream, const Tensor& statistics, const Tensor& d_scores = {},
                                     const BiasGradOut& bias = {}) {
  const KernelCall call = KernelCall::model("flash_attention_backward", qkv, stream);
  detail::check_shape(call, shape);
  detail::check_dropout(call, dropout_args, shape.batch);
  const std::int64_t tokens = shape.batch * shape.seq, channels = shape.heads * shape.head_dim;
  detail::check_activation(call, "d_out", d_out, tokens * channels);
  detail::check_activation(call, "qkv", qkv, tokens * 3 * channels);
  detail::check_activation(call, "out", out, tokens * channels);
  call.exact("logsumexp", logsumexp, tokens * shape.heads, Role::statistic);
  detail::check_activation(call, "d_qkv", d_qkv, tokens * 3 * channels);
  // d_qkv is written while the inputs are still read.
  auto overlaps = [](const Tensor& a, const Tensor& b) {
    const auto* a_begin = static_cast<const char*>(a.data);
    const auto* b_begin = static_cast<const char*>(b.data);
    return a_begin < b_begin + b.bytes() && b_begin < a_begin + a.bytes();
  };
  for (const Tensor* input : {&d_out, &qkv, &out, &logsumexp}) {
    ADAMANT_CHECK(!overlaps(*input, d_qkv), "{}: d_qkv overlaps an input; give d_qkv its own memory", call.op());
  }
  if (call.on_cuda()) {
    const std::size_t needed = flash_attention_statistics_bytes(shape);
    ADAMANT_CHECK(
        needed == 0 || (statistics.data != nullptr && statistics.device == qkv.device && statistics.bytes() >= needed &&
                        reinterpret_cast<std::uintptr_t>(statistics.data) % 16 == 0),
        "{}: a statistics scratch of {} bytes on {}; the GPU's backward needs {} bytes "
        "(flash_attention_statistics_bytes), 16-byte aligned, on {} (a Workspace made with "
        "WorkspaceNeeds::attention_statistics_bytes holds one)",
        call.op(), statistics.bytes(), statistics.data != nullptr ? statistics.device.str() : "no device", needed,
        qkv.device.str());
    for (const Tensor* operand : {&d_out, &qkv, &out, &logsumexp, static_cast<const Tensor*>(&d_qkv), &d_scores}) {
      ADAMANT_CHECK(operand->data == nullptr || statistics.data == nullptr || !overlaps(*operand, statistics),
                    "{}: the statistics scratch overlaps an operand; give it its own memory", call.op());
    }
  }
  ADAMANT_CHECK(bias.d_bias.data == nullptr || bias.columns == 3 * channels,
                "{}: the bias gradient's rows are d_qkv's, 3 x heads x head_dim = {} columns, not {}", call.op(),
                3 * channels, bias.columns);
  const bool summing = check_bias_grad_out(call, bias, tokens * 3 * channels);
  if (tokens == 0) {
    if (summing) bias_grad(d_qkv, bias.d_bias, 0, bias.columns, *bias.workspace, stream);  // zeros
    return;
  }
  call.run(
      [&] {
        cpu::flash_attention_backward(d_out, qkv, out, logsumexp, d_qkv, shape, dropout_args);
        if (summing) cpu::bias_grad(d_qkv, bias.d_bias, tokens, bias.columns);
      },
      ADAMANT_CUDA_CALL(cuda::flash_attention_backward(d_out, qkv, out, logsumexp, d_qkv, shape, dropout_args, stream,
                                                       statistics, d_scores, cuda::column_sums_out(bias))));
}

// The model's call: the backward takes the statistics scratch `workspace` holds
// (WorkspaceNeeds::attention_statistics_bytes, which a GPU's needs) and its score scratch, if
// it holds one (WorkspaceNeeds::attention_scores_bytes, one or more slots'
// flash_attention_scores_bytes). bias: as above.
inline void flash_attention_backward(const Tensor& d_out, const Tensor& qkv, const Tensor& out, const Tensor& logsumexp,
                                     Tensor d_qkv, const AttentionShape& shape, const DropoutArgs& dropout_args,
                                     const Workspace& workspace, const Stream& stream, const BiasGradOut& bias = {}) {
  KernelCall::model("flash_attention_backward", qkv, stream).uses(workspace);
  auto bytes_of = [&](void* data, std::size_t bytes) {
    return data == nullptr ? Tensor{} : Tensor(data, DType::u8, workspace.device(), {static_cast<std::int64_t>(bytes)});
  };
  flash_attention_backward(d_out, qkv, out, logsumexp, d_qkv, shape, dropout_args, stream,
                           bytes_of(workspace.attention_statistics(), workspace.needs().attention_statistics_bytes),
                           bytes_of(workspace.attention_scores(), workspace.needs().attention_scores_bytes), bias);
}

}  // namespace adamant::kernels
