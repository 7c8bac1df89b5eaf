// The CUDA entry points of flash attention (flash_attention_cuda.h): check the
// Tensors, turn them and the dropout arguments into the plain launch arguments of
// flash_attention_launchers.h, make the data's GPU current, and turn launch
// failures into adamant::Error.
#include "adamant/kernels/cuda/flash_attention_cuda.h"

#include <cuda_runtime.h>

#include <climits>
#include <cstdint>

#include "adamant/core/cuda_check.h"
#include "adamant/core/error.h"
#include "adamant/kernels/cuda/flash_attention_launchers.h"

namespace adamant::kernels::cuda {

namespace {

namespace launchers = flash_attention_launchers;

// Makes the data's GPU current for the launch and restores the caller's afterwards.
class FlashDeviceGuard {
 public:
  explicit FlashDeviceGuard(Device device) {
    ADAMANT_CUDA_CHECK(cudaGetDevice(&previous_));
    if (previous_ != device.index) ADAMANT_CUDA_CHECK(cudaSetDevice(device.index));
    current_ = device.index;
  }
  ~FlashDeviceGuard() {
    if (previous_ != current_) cudaSetDevice(previous_);
  }
  FlashDeviceGuard(const FlashDeviceGuard&) = delete;
  FlashDeviceGuard& operator=(const FlashDeviceGuard&) = delete;

 private:
  int previous_ = 0;
  int current_ = 0;
};

// Checks one operand: its dtype, on `device`, exactly `numel` elements, and aligned
// to `alignment` bytes for the kernels' vector accesses.
void check_operand(const char* op, const char* name, const Tensor& t, DType dtype, Device device, std::int64_t numel,
                   std::size_t alignment) {
  ADAMANT_CHECK(t.data != nullptr, "{}: operand {} is empty", op, name);
  ADAMANT_CHECK(t.dtype == dtype, "{}: operand {} is {}; the CUDA flash attention kernels take {}", op, name,
                dtype_name(t.dtype), dtype_name(dtype));
  ADAMANT_CHECK(t.device == device, "{}: operand {} is on {}, qkv on {}", op, name, t.device.str(), device.str());
  ADAMANT_CHECK(static_cast<std::int64_t>(t.numel()) == numel, "{}: operand {} has {} elements, expected {}", op, name,
                t.numel(), numel);
  ADAMANT_CHECK(reinterpret_cast<std::uintptr_t>(t.data) % alignment == 0,
                "{}: operand {} at {} is not {}-byte aligned; allocate it on a {}-byte boundary", op, name, t.data,
                alignment, alignment);
}

void check_shape(const char* op, const AttentionShape& shape) {
  ADAMANT_CHECK(shape.batch >= 0 && shape.seq >= 0, "{}: batch {} and seq {} must not be negative", op, shape.batch,
                shape.seq);
  ADAMANT_CHECK(shape.heads > 0 && shape.heads <= 65535, "{}: heads is {}; the CUDA kernel takes 1 to 65535", op,
                shape.heads);
  ADAMANT_CHECK(launchers::supported_head_dim(shape.head_dim),
                "{}: head_dim {} is not supported on CUDA; use 64 or 128 (e.g. hidden_size / num_attention_heads)", op,
                shape.head_dim);
  ADAMANT_CHECK(shape.batch <= 65535, "{}: batch {} exceeds the kernel's grid limit 65535; split the batch", op,
                shape.batch);
  ADAMANT_CHECK(shape.seq <= INT_MAX / 2, "{}: seq {} is too long", op, shape.seq);
}

launchers::Problem problem_of(const AttentionShape& shape) {
  return {static_cast<int>(shape.batch), static_cast<int>(shape.seq), static_cast<int>(shape.heads),
          static_cast<int>(shape.head_dim)};
}

// The same mask parameters as the probability-based kernels (attention_cuda.cpp), so
// that both drop exactly the CPU's elements.
launchers::Dropout dropout_of(const char* op, const DropoutArgs& args, std::int64_t batch) {
  ADAMANT_CHECK(args.probability >= 0.0f && args.probability < 1.0f, "{}: dropout probability {} is outside [0, 1)", op,
                args.probability);
  ADAMANT_CHECK(args.site < (1u << kDropoutSiteBits), "{}: dropout site {} exceeds {} bits", op, args.site,
                kDropoutSiteBits);
  ADAMANT_CHECK(args.first_sample_index + static_cast<std::uint64_t>(batch) <= kMaxDropoutSample,
                "{}: sample index {} is beyond the dropout generator's range", op, args.first_sample_index);
  launchers::Dropout dropout{};
  dropout.enabled = args.probability > 0.0f;
  dropout.probability = args.probability;
  dropout.keep_scale = 1.0f / (1.0f - args.probability);
  dropout.seed = args.seed;
  dropout.stream_base = dropout_stream(args.first_sample_index, args.site);
  dropout.stream_per_sample = dropout_stream(args.first_sample_index + 1, args.site) - dropout.stream_base;
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
cudaStream_t stream_of(const Stream& stream) { return static_cast<cudaStream_t>(stream.handle()); }

}  // namespace

void flash_attention_forward(const Tensor& qkv, Tensor out, Tensor logsumexp, const AttentionShape& shape,
                             const DropoutArgs& dropout_args, const Stream& stream) {
  constexpr const char* kOp = "flash_attention_forward";
  check_shape(kOp, shape);
  const launchers::Dropout dropout = dropout_of(kOp, dropout_args, shape.batch);
  ADAMANT_CHECK(qkv.device.is_cuda(), "{}: qkv is on {}; the CUDA kernel needs GPU memory", kOp, qkv.device.str());
  const std::int64_t tokens = shape.batch * shape.seq, channels = shape.heads * shape.head_dim;
  check_operand(kOp, "qkv", qkv, DType::bf16, qkv.device, tokens * 3 * channels, 16);
  check_operand(kOp, "out", out, DType::bf16, qkv.device, tokens * channels, 16);
  check_operand(kOp, "logsumexp", logsumexp, DType::f32, qkv.device, tokens * shape.heads, 4);
  if (tokens == 0) return;
  const FlashDeviceGuard guard(qkv.device);
  const launchers::ForwardOperands operands{bits_of(qkv), mutable_bits_of(out), static_cast<float*>(logsumexp.data)};
  check_launch(launchers::flash_attention_forward(operands, problem_of(shape), dropout, stream_of(stream)), kOp, shape);
}

void flash_attention_backward(const Tensor& d_out, const Tensor& qkv, const Tensor& out, const Tensor& logsumexp,
                              Tensor d_qkv, const AttentionShape& shape, const DropoutArgs& dropout_args,
                              const Stream& stream) {
  constexpr const char* kOp = "flash_attention_backward";
  check_shape(kOp, shape);
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
  const FlashDeviceGuard guard(qkv.device);
  const launchers::BackwardOperands operands{bits_of(d_out), bits_of(qkv), bits_of(out),
                                             static_cast<const float*>(logsumexp.data), mutable_bits_of(d_qkv)};
  check_launch(launchers::flash_attention_backward(operands, problem_of(shape), dropout, stream_of(stream)), kOp,
               shape);
}

}  // namespace adamant::kernels::cuda
