#pragma once
// Raw-pointer launchers behind the CUDA layernorm, GELU, residual add, dropout and
// embedding kernels (no Tensor or fmt, so that nvcc compiles the *.cu files). The
// Tensor-level wrappers (layernorm_cuda.cpp, pointwise_model_cuda.cpp,
// embedding_cuda.cpp) check the operands, make the GPU current and turn the
// returned status into an adamant::Error.
//
// Storage: bf16 tensors are passed as their 16-bit patterns (std::uint16_t);
// every computation is done in fp32. `vectorized` says that every operand the
// kernel reads or writes with 16-byte accesses is 16-byte aligned; the kernels
// then use 8-element bf16 vectors where the shape allows and scalar accesses
// elsewhere.
#include <cuda_runtime.h>

#include <cstdint>

namespace adamant::kernels::cuda::launchers {

struct PointwiseLaunch {
  int multiprocessors = 1;
  bool vectorized = false;
  cudaStream_t stream = nullptr;
};

// ---- layernorm (layernorm.cu) ----

cudaError_t layernorm_forward(const std::uint16_t* x, const std::uint16_t* weight, const std::uint16_t* bias,
                              float epsilon, std::uint16_t* out, float* mean, float* rstd, std::int64_t rows,
                              std::int64_t cols, const PointwiseLaunch& launch);

// The fp32 workspace layernorm_backward needs: per-chunk column partial sums of
// d_weight and d_bias. The chunking depends on the shape only, so the summation
// order (and the result) is the same on every run.
std::int64_t layernorm_backward_workspace_floats(std::int64_t rows, std::int64_t cols);

cudaError_t layernorm_backward(const std::uint16_t* d_out, const std::uint16_t* x, const std::uint16_t* weight,
                               const float* mean, const float* rstd, std::uint16_t* d_x, float* d_weight, float* d_bias,
                               float* workspace, std::int64_t rows, std::int64_t cols, const PointwiseLaunch& launch);

// ---- element-wise model ops (pointwise_model.cu) ----

// out = gelu(x), the exact form or (tanh_form) GPT-2's tanh approximation; out may alias x.
cudaError_t gelu_forward(const std::uint16_t* x, std::uint16_t* out, std::int64_t n, bool tanh_form,
                         const PointwiseLaunch& launch);
// d_x = d_out * gelu'(x); d_x may alias d_out.
cudaError_t gelu_backward(const std::uint16_t* d_out, const std::uint16_t* x, std::uint16_t* d_x, std::int64_t n,
                          bool tanh_form, const PointwiseLaunch& launch);
// out = a + b; out may alias a or b.
cudaError_t residual_add(const std::uint16_t* a, const std::uint16_t* b, std::uint16_t* out, std::int64_t n,
                         const PointwiseLaunch& launch);

// The fields of kernels::DropoutArgs (dropout.h includes fmt, so it is not used here).
struct DropoutParams {
  float probability = 0.0f;
  float keep_scale = 1.0f;  // 1 / (1 - probability) rounded to fp32, as the CPU kernel computes it
  std::uint64_t seed = 0;
  std::uint64_t first_sample_index = 0;
  std::uint32_t site = 0;
  std::uint64_t first_element = 0;  // a multiple of 4
};

// out[i] = keep ? in[i] * keep_scale : 0 for i in [0, numel), element i being element
// first_element + i of the batch flattened as [samples, sample_numel]; out may alias
// in. For `vectorized` the kernel needs only 8-byte alignment of in and out.
cudaError_t dropout(const std::uint16_t* in, std::uint16_t* out, std::int64_t numel, std::int64_t sample_numel,
                    const DropoutParams& params, const PointwiseLaunch& launch);

// ---- embeddings (embedding.cu) ----

// out[b, t] = word[tokens[b, t] - vocab_start] + position[t], a zero word row for a token
// outside [vocab_start, vocab_start + vocab), no position term when position is null. A
// row whose token is negative is written as NaN (the GPU cannot throw; NaN makes the
// loss say so).
cudaError_t embedding_forward(const std::int32_t* tokens, const std::uint16_t* word, const std::uint16_t* position,
                              std::uint16_t* out, std::int64_t batch, std::int64_t seq, std::int64_t channels,
                              std::int64_t vocab, std::int64_t vocab_start, const PointwiseLaunch& launch);

// d_word[tokens[b, t] - vocab_start] += d_out[b, t] for the tokens of the slice;
// d_position[t] += sum over b of d_out[b, t] unless d_position is null. Deterministic
// without atomics or sorting (see embedding.cu).
cudaError_t embedding_backward(const std::uint16_t* d_out, const std::int32_t* tokens, float* d_word, float* d_position,
                               std::int64_t batch, std::int64_t seq, std::int64_t channels, std::int64_t vocab,
                               std::int64_t vocab_start, const PointwiseLaunch& launch);

}  // namespace adamant::kernels::cuda::launchers
