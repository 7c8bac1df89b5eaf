#include <algorithm>
#include <climits>
#include <string>

#include "adamant/core/error.h"
#include "adamant/kernels/cuda/attention_operands.h"

namespace adamant::kernels::cuda::attention_operands {

namespace {

// "64 or 128", "64, 80, 96 or 128": the sizes for an error message.
std::string list_of_sizes(std::span<const std::int64_t> sizes) {
  std::string text;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    if (i > 0) text += i + 1 == sizes.size() ? " or " : ", ";
    text += std::to_string(sizes[i]);
  }
  return text;
}

}  // namespace

void check_operand(const char* op, const char* name, const Tensor& t, DType dtype, Device device, std::int64_t numel,
                   std::size_t alignment, bool at_least) {
  ADAMANT_CHECK(t.data != nullptr, "{}: operand {} is empty", op, name);
  ADAMANT_CHECK(t.dtype == dtype, "{}: operand {} is {}; the CUDA attention kernels take {} there", op, name,
                dtype_name(t.dtype), dtype_name(dtype));
  ADAMANT_CHECK(t.device == device, "{}: operand {} is on {}, qkv on {}", op, name, t.device.str(), device.str());
  const auto actual = static_cast<std::int64_t>(t.numel());
  ADAMANT_CHECK(at_least ? actual >= numel : actual == numel, "{}: operand {} has {} elements, expected {}{}", op, name,
                actual, at_least ? "at least " : "", numel);
  ADAMANT_CHECK(reinterpret_cast<std::uintptr_t>(t.data) % alignment == 0,
                "{}: operand {} at {} is not {}-byte aligned; allocate it on a {}-byte boundary", op, name, t.data,
                alignment, alignment);
}

void check_shape(const char* op, const AttentionShape& shape, std::span<const std::int64_t> supported_head_dims) {
  ADAMANT_CHECK(shape.batch >= 0 && shape.seq >= 0, "{}: batch {} and seq {} must not be negative", op, shape.batch,
                shape.seq);
  ADAMANT_CHECK(shape.heads > 0 && shape.heads <= 65535, "{}: heads is {}; the CUDA kernel takes 1 to 65535", op,
                shape.heads);
  ADAMANT_CHECK(
      std::find(supported_head_dims.begin(), supported_head_dims.end(), shape.head_dim) != supported_head_dims.end(),
      "{}: head_dim {} is not supported on CUDA; use {} (e.g. hidden_size / num_attention_heads)", op, shape.head_dim,
      list_of_sizes(supported_head_dims));
  ADAMANT_CHECK(shape.batch <= 65535, "{}: batch {} exceeds the kernel's grid limit 65535; split the batch", op,
                shape.batch);
  ADAMANT_CHECK(shape.seq <= INT_MAX / 2, "{}: seq {} is too long", op, shape.seq);
}

attention_launchers::Problem problem_of(const AttentionShape& shape) {
  return {static_cast<int>(shape.batch), static_cast<int>(shape.seq), static_cast<int>(shape.heads),
          static_cast<int>(shape.head_dim)};
}

attention_launchers::Dropout dropout_of(const char* op, const DropoutArgs& args, std::int64_t batch) {
  ADAMANT_CHECK(args.probability >= 0.0f && args.probability < 1.0f, "{}: dropout probability {} is outside [0, 1)", op,
                args.probability);
  ADAMANT_CHECK(args.site < (1u << kDropoutSiteBits), "{}: dropout site {} exceeds {} bits", op, args.site,
                kDropoutSiteBits);
  ADAMANT_CHECK(args.first_sample_index + static_cast<std::uint64_t>(batch) <= kMaxDropoutSample,
                "{}: sample index {} is beyond the dropout generator's range", op, args.first_sample_index);
  attention_launchers::Dropout dropout{};
  dropout.enabled = args.probability > 0.0f;
  dropout.probability = args.probability;
  dropout.keep_scale = 1.0f / (1.0f - args.probability);
  dropout.seed = args.seed;
  // Sample b's stream is dropout_stream(first + b, site): the site sits below the
  // sample index, so consecutive samples' streams are a fixed step apart.
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

}  // namespace adamant::kernels::cuda::attention_operands
