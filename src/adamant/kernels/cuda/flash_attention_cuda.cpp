// The CUDA entry points of flash attention (kernels/flash_attention.h), called by its
// dispatcher with checked operands: turn the Tensors and the dropout arguments into
// the plain launch arguments of flash_attention_launchers.h, make the data's GPU
// current, and turn launch failures into adamant::Error.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "adamant/core/cuda_launch_guard.h"
#include "adamant/core/error.h"
#include "adamant/kernels/attention_dropout_layout.h"
#include "adamant/kernels/cuda/flash_attention_launchers.h"
#include "adamant/kernels/flash_attention.h"

namespace adamant::kernels::cuda {

namespace {

namespace launchers = flash_attention_launchers;

static_assert(launchers::kSupportedHeadDims == kCudaFlashHeadDims,
              "the kernels instantiate the head sizes kernels/flash_attention.h accepts");

launchers::Problem problem_of(const AttentionShape& shape) {
  return {static_cast<int>(shape.batch), static_cast<int>(shape.seq), static_cast<int>(shape.heads),
          static_cast<int>(shape.head_dim)};
}

launchers::Dropout dropout_of(const DropoutArgs& args) {
  launchers::Dropout dropout{};
  dropout.enabled = args.probability > 0.0f;
  dropout.probability = args.probability;
  dropout.keep_scale = attention_dropout_layout::keep_scale(args.probability);
  dropout.seed = args.seed;
  // Sample b's stream is dropout_stream(first + b, site): the site sits below the
  // sample index, so consecutive samples' streams are a fixed step apart.
  dropout.stream_base = dropout_stream(args.first_sample_index, args.site);
  dropout.stream_per_sample = dropout_stream(args.first_sample_index + 1, args.site) - dropout.stream_base;
  dropout.sample_offset = args.sample_offset;
  return dropout;
}

void check_launch(cudaError_t status, const char* op, const AttentionShape& shape) {
  if (status != cudaSuccess) {
    fail("{}: CUDA kernel failed to launch for batch {}, seq {}, heads {}, head_dim {}: {} (error {})", op, shape.batch,
         shape.seq, shape.heads, shape.head_dim, cudaGetErrorString(status), static_cast<int>(status));
  }
}

const std::uint16_t* bits_of(const Tensor& t) { return static_cast<const std::uint16_t*>(t.data); }
std::uint16_t* mutable_bits_of(const Tensor& t) { return static_cast<std::uint16_t*>(t.data); }

}  // namespace

void flash_attention_forward(const Tensor& qkv, Tensor out, Tensor logsumexp, const AttentionShape& shape,
                             const DropoutArgs& dropout_args, const Stream& stream) {
  constexpr const char* kOp = "flash_attention_forward";
  const CudaLaunchGuard guard(qkv.device, kOp);
  const launchers::ForwardOperands operands{bits_of(qkv), mutable_bits_of(out), static_cast<float*>(logsumexp.data)};
  check_launch(
      launchers::flash_attention_forward(operands, problem_of(shape), dropout_of(dropout_args), cuda_stream_of(stream)),
      kOp, shape);
}

void flash_attention_backward(const Tensor& d_out, const Tensor& qkv, const Tensor& out, const Tensor& logsumexp,
                              Tensor d_qkv, const AttentionShape& shape, const DropoutArgs& dropout_args,
                              const Stream& stream, const Tensor& statistics, const Tensor& d_scores,
                              const ColumnSumsOut& bias) {
  constexpr const char* kOp = "flash_attention_backward";
  const CudaLaunchGuard guard(qkv.device, kOp);
  const bool stores_scores = d_scores.data != nullptr && shape.batch > 0 && shape.seq > 0;
  launchers::BackwardOperands operands{bits_of(d_out),         bits_of(qkv),
                                       bits_of(out),           static_cast<const float*>(logsumexp.data),
                                       mutable_bits_of(d_qkv), static_cast<float*>(statistics.data)};
  if (stores_scores) {
    const std::size_t slot_bytes = flash_attention_scores_bytes(1, 1, shape.seq);
    ADAMANT_CHECK(d_scores.device == qkv.device && d_scores.bytes() >= slot_bytes &&
                      reinterpret_cast<std::uintptr_t>(d_scores.data) % 16 == 0,
                  "{}: a score scratch of {} bytes on {}; it needs at least {} bytes (one sample and head; {} for "
                  "all at once), 16-byte aligned, on {}",
                  kOp, d_scores.bytes(), d_scores.device.str(), slot_bytes, flash_attention_scores_bytes(shape),
                  qkv.device.str());
    operands.d_scores = static_cast<std::uint16_t*>(d_scores.data);
    operands.score_slots =
        static_cast<int>(std::min(d_scores.bytes() / slot_bytes, static_cast<std::size_t>(shape.batch * shape.heads)));
  }
  check_launch(launchers::flash_attention_backward(operands, problem_of(shape), dropout_of(dropout_args),
                                                   cuda_stream_of(stream), bias),
               kOp, shape);
}

}  // namespace adamant::kernels::cuda
